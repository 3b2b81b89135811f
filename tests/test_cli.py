"""The command-line contract shared by every target, exercised as a user would run it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.records import FileResult

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "mlp_regression" / "train.py"
MAIN_CASE = ROOT / "tests" / "cases" / "main_function" / "input.py"


def migrate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(MAIN_CASE, tmp_path / "train.py")
    return tmp_path


def test_prints_a_diff_that_git_applies_and_writes_nothing(project: Path) -> None:
    before = (project / "train.py").read_text()
    result = migrate("to-ddp", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "train.py").read_text() == before
    assert not (project / "run_train_ddp.sh").exists()
    assert "+++ b/train.py" in result.stdout and "+++ b/run_train_ddp.sh" in result.stdout
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "ddp.patch").write_text(result.stdout)
    subprocess.run(["git", "apply", "ddp.patch"], cwd=project, check=True)
    written = migrate("to-ddp", "--write", "train.py", cwd=project.parent / project.name)
    assert written.returncode == 0
    assert "MIG001" in written.stderr  # the applied patch is already distributed: nothing more to do
    assert os.access(project / "run_train_ddp.sh", os.X_OK)


def test_write_converts_in_place_keeping_mode_and_adds_the_launch_script(project: Path) -> None:
    script = project / "train.py"
    script.chmod(0o750)
    result = migrate("to-ddp", "--write", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    text = script.read_text()
    assert "dist.init_process_group(" in text and "DistributedSampler(" in text
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    launcher = project / "run_train_ddp.sh"
    assert "torchrun" in launcher.read_text() and os.access(launcher, os.X_OK)
    assert not [p for p in project.iterdir() if p.name.startswith(".migrate-")]


def test_check_lists_files_that_would_change_and_exits_one(project: Path) -> None:
    result = migrate("to-ddp", "--check", "train.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout.strip() == "train.py"
    migrate("to-ddp", "--write", "train.py", cwd=project)
    assert migrate("to-ddp", "--check", "train.py", cwd=project).returncode == 0


def test_check_with_a_broken_file_says_both_in_its_exit_status(project: Path) -> None:
    """Exit flags: 1 (files would change) + 2 (an error) = 3, and the good file is still listed."""
    (project / "broken.py").write_text("def f(:\n    loss.backward()\n")
    result = migrate("to-ddp", "--check", "train.py", "broken.py", cwd=project)
    assert result.returncode == 3
    assert result.stdout.strip() == "train.py"
    assert "broken.py:1:" in result.stderr and "syntax error" in result.stderr
    assert migrate("to-ddp", "--check", "broken.py", cwd=project).returncode == 2


def test_a_usage_error_under_report_json_is_the_one_json_document_on_stderr(tmp_path: Path) -> None:
    result = migrate("to-ddp", "--report", "json", "--zero", "3", "train.py", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    entries = json.loads(result.stderr)
    assert [(e["code"], e["severity"]) for e in entries] == [("MIG900", "error")]
    assert "--zero" in entries[0]["message"]
    plain = migrate("to-ddp", "--zero", "3", "train.py", cwd=tmp_path)
    assert plain.returncode == 2 and "No such option: --zero" in plain.stderr and not plain.stderr.startswith("[")


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    result = migrate("to-ddp", "nope.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "migrate: nope.py: no such file\n"


def test_syntax_error_names_the_place_and_leaves_the_file(tmp_path: Path) -> None:
    broken = "import torch\nloss.backward()\nfor x in range(3)\n    pass\n"
    (tmp_path / "bad.py").write_text(broken)
    result = migrate("to-ddp", "--write", "bad.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("migrate: bad.py:3:")
    assert "syntax error" in result.stderr
    assert (tmp_path / "bad.py").read_text() == broken


def test_undecodable_file_is_refused_with_its_position(tmp_path: Path) -> None:
    (tmp_path / "latin.py").write_bytes(b"# caf\xe9\nloss.backward()\n")
    result = migrate("to-ddp", "latin.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "latin.py:1:6: not valid utf-8" in result.stderr


def test_coding_cookie_is_honoured_and_kept(tmp_path: Path) -> None:
    source = MAIN_CASE.read_text().replace("import argparse", "# -*- coding: latin-1 -*-\n# caf\xe9\nimport argparse", 1)
    (tmp_path / "train.py").write_bytes(source.encode("latin-1"))
    result = migrate("to-ddp", "--write", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    raw = (tmp_path / "train.py").read_bytes()
    assert b"caf\xe9" in raw and b"init_process_group" in raw


def test_crlf_and_tabs_survive(tmp_path: Path) -> None:
    source = MAIN_CASE.read_text().replace("    ", "\t").replace("\n", "\r\n")
    (tmp_path / "train.py").write_bytes(source.encode())
    result = migrate("to-ddp", "--write", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    raw = (tmp_path / "train.py").read_bytes()
    assert b"\n" not in raw.replace(b"\r\n", b"")
    assert b"\tdist.init_process_group(" in raw and b"    " not in raw.split(b"class")[0]
    compile(raw, "train.py", "exec")


def test_read_only_file_is_an_error_and_nothing_is_written(project: Path) -> None:
    script = project / "train.py"
    before = script.read_text()
    script.chmod(0o444)
    result = migrate("to-ddp", "--write", "train.py", cwd=project)
    assert result.returncode == 2
    assert "migrate: train.py: is read-only" in result.stderr
    assert script.read_text() == before
    assert not (project / "run_train_ddp.sh").exists()


def test_not_a_training_script_is_left_alone_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text("import torch\n\ndef norm(x):\n    return x / x.norm()\n")
    result = migrate("to-ddp", "--write", "utils.py", cwd=tmp_path)
    assert result.returncode == 0
    assert "utils.py:1:1: note: MIG002" in result.stderr
    assert (tmp_path / "utils.py").read_text().startswith("import torch")


def test_findings_point_at_the_line_with_the_manual_step(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "cases" / "manual_batching" / "input.py", tmp_path / "train.py")
    result = migrate("to-ddp", "train.py", cwd=tmp_path)
    assert result.returncode == 0
    line = next(l for l in result.stderr.splitlines() if "MIG101" in l)
    path, row, col, rest = line.split(":", 3)
    assert path == "train.py" and int(row) > 1 and int(col) >= 1
    source_line = (tmp_path / "train.py").read_text().splitlines()[int(row) - 1]
    assert source_line.lstrip().startswith("for ")
    assert "shard" in rest


def test_json_report(project: Path) -> None:
    import json

    result = migrate("to-ddp", "--report", "json", "train.py", cwd=project)
    assert result.returncode == 0
    findings = json.loads(result.stderr)
    # the sample's one note: its epoch loss, summed in the loop, is averaged over the ranks after it
    assert [(f["path"], f["code"], f["severity"]) for f in findings] == [("train.py", "MIG007", "note")]
    assert "`running_loss` averaged over every rank" in findings[0]["message"]


def test_help_explains_each_option() -> None:
    result = migrate("to-ddp", "--help", cwd=ROOT)
    assert result.returncode == 0
    for option in ("--write", "--check", "--nproc-per-node", "--keep-global-batch", "--scale-lr", "--sync-batchnorm"):
        assert option in result.stdout
    assert "Example" in result.stdout


def test_bad_nproc_value_is_rejected(project: Path) -> None:
    result = migrate("to-ddp", "--nproc-per-node", "many", "train.py", cwd=project)
    assert result.returncode == 2
    assert "many" in result.stderr


@pytest.mark.parametrize("option, expected", [
    ("--keep-global-batch", "batch_size=max(1, args.batch_size // dist.get_world_size())"),
    ("--scale-lr", "lr=args.lr * dist.get_world_size()"),
    ("--sync-batchnorm", "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)"),
    ("--nproc-per-node=4", 'NPROC_PER_NODE:-4'),
])
def test_options_change_the_output(project: Path, option: str, expected: str) -> None:
    result = migrate("to-ddp", option, "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


@pytest.mark.parametrize("command", ["to-ddp", "to-deepspeed"])
def test_samples_convert_once(tmp_path: Path, command: str) -> None:
    for sample in sorted((ROOT / "samples").glob("*/train.py")):
        target = tmp_path / sample.parent.name
        target.mkdir()
        shutil.copy(sample, target / "train.py")
        first = migrate(command, "--write", "train.py", cwd=target)
        assert first.returncode == 0, first.stderr
        again = migrate(command, "--check", "train.py", cwd=target)
        assert again.returncode == 0, f"{sample}: second run would change the file"


def test_a_model_driven_through_a_custom_method_is_left_unchanged(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "cases" / "custom_method" / "input.py", tmp_path / "train.py")
    for command in ("to-ddp", "to-deepspeed"):
        result = migrate(command, "train.py", cwd=tmp_path)
        assert result.returncode == 0 and result.stdout == ""
        assert "train.py:18:13: warning: MIG104 `optimizer` steps the parameters of `agent` (line 14), which is called only " \
            "through `agent.get_value(...)` (line 18), not through its forward()" in result.stderr


def test_version_and_short_help(tmp_path: Path) -> None:
    version = migrate("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("migrate (torch-migrate) ")
    short = migrate("to-ddp", "-h", cwd=tmp_path)
    assert short.returncode == 0
    assert short.stdout.startswith("Usage: migrate to-ddp [OPTIONS] PATH...\n")
    assert "{" not in short.stdout and "<list" not in short.stdout


def test_help_lists_every_target(tmp_path: Path) -> None:
    listing = migrate("--help", cwd=tmp_path).stdout
    for command in ("to-ddp", "to-deepspeed", "verify", "to-fsdp", "to-horovod", "to-dp"):
        assert f"  {command} " in listing
    assert "planned" not in listing


def test_text_findings_carry_their_severity(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "cases" / "manual_batching" / "input.py", tmp_path / "train.py")
    result = migrate("to-ddp", "train.py", cwd=tmp_path)
    assert ": warning: MIG101 " in result.stderr


def test_nothing_to_change_is_said(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text("import torch\n\ndef norm(x):\n    return x / x.norm()\n")
    result = migrate("to-ddp", "utils.py", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == ""
    assert "migrate: nothing to change (the findings above say why)" in result.stderr


def test_a_syntax_error_is_bad_input_even_without_backward(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def f(:\n    pass\n")
    result = migrate("to-ddp", "helpers.py", cwd=tmp_path)
    assert result.returncode == 2 and "helpers.py:1:" in result.stderr and "syntax error" in result.stderr


def test_options_that_contradict_are_refused(project: Path) -> None:
    result = migrate("to-ddp", "--keep-global-batch", "--scale-lr", "train.py", cwd=project)
    assert result.returncode == 2 and "choose one" in result.stderr


@pytest.mark.parametrize("nproc, said", [
    ("auto", "one process per GPU (torchrun's `auto`: one per CPU core on a host without GPUs)"),
    ("gpu", "one process per GPU"),
    ("4", "4 processes per node"),
])
def test_the_launcher_says_what_it_starts(project: Path, nproc: str, said: str) -> None:
    result = migrate("to-ddp", "--nproc-per-node", nproc, "train.py", cwd=project)
    assert f"+# Launches train.py with torchrun on this machine: {said}; NPROC_PER_NODE overrides it.\n" in result.stdout


@pytest.mark.parametrize(("counts", "said"), [
    ((1, 0, 1), "2 Python files: 1 to convert, 1 error"),
    ((0, 1, 1), "2 Python files: none to convert, 1 not training script (MIG002, not listed), 1 error"),
    ((2, 2, 2), "6 Python files: 2 to convert, 2 not training scripts (MIG002, not listed), 2 errors"),
    ((0, 0, 1), "1 Python file: none to convert, 1 error"),
])
def test_the_folder_summary_counts_in_singular_and_plural(counts: tuple[int, int, int], said: str) -> None:
    from migrate.cli import _summary
    from migrate.records import Finding, Severity

    converted, not_training, errors = counts
    results = [FileResult(path=f"c{i}.py", old="a\n", new="b\n") for i in range(converted)]
    results += [FileResult(path=f"n{i}.py", old="a\n", new="a\n", skipped=True,
                           findings=(Finding("MIG002", Severity.NOTE, "not a training script"),))
                for i in range(not_training)]
    assert _summary(results, not_training, errors, written=False) == said


def test_one_file_that_does_not_parse_is_one_python_file_and_one_error(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "broken.py").write_text("def f(:\n    loss.backward()\n")
    result = migrate("to-ddp", "scripts", cwd=tmp_path)
    assert result.returncode == 2
    assert "migrate: 1 Python file: none to convert, 1 error\n" in result.stderr


def test_an_advisory_note_is_said_once_per_run_not_once_per_file(tmp_path: Path) -> None:
    """MIG006 (what nn.DataParallel is for: the same for every script) over a folder of three scripts:
    one line, then a line saying it applies to all three; JSON keeps an entry per file."""
    folder = tmp_path / "scripts"
    folder.mkdir()
    for name in ("mlp_regression", "cnn_classifier", "autoencoder"):
        shutil.copy(ROOT / "samples" / name / "train.py", folder / f"{name}.py")
    result = migrate("to-dp", "scripts", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "MIG006" in line]
    assert len(said) == 2 and said[0].startswith("scripts/autoencoder.py:") and ": note: MIG006 " in said[0]
    assert said[1] == "migrate: MIG006 above is said once: it applies alike to each of the 3 files that drew it"
    entries = json.loads(migrate("to-dp", "--report", "json", "scripts", cwd=tmp_path).stderr)
    assert sorted(e["path"] for e in entries if e["code"] == "MIG006") == [
        "scripts/autoencoder.py", "scripts/cnn_classifier.py", "scripts/mlp_regression.py"]
