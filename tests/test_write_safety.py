"""`--write` is all or nothing and loses nothing: every output is checked before the first write,
generated files go before the script they belong to, edits made meanwhile are never overwritten,
and the written file keeps its link, owner, group, mode and extended attributes."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from migrate import api, writing
from migrate.records import FileResult, InputError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "cases" / "main_function" / "input.py"


def migrate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def two_scripts(tmp_path: Path) -> Path:
    shutil.copy(SCRIPT, tmp_path / "a.py")
    shutil.copy(SCRIPT, tmp_path / "b.py")
    return tmp_path


def test_an_existing_launcher_that_differs_stops_every_write(two_scripts: Path) -> None:
    (two_scripts / "run_b_ddp.sh").write_text("#!/bin/sh\necho my own launcher\n")
    before = snapshot(two_scripts)
    result = migrate("to-ddp", "--write", "a.py", "b.py", cwd=two_scripts)
    assert result.returncode == 2
    assert "run_b_ddp.sh: exists and differs from the file generated for b.py; it is never overwritten" in result.stderr
    assert "nothing was written" in result.stderr
    assert snapshot(two_scripts) == before  # not even a.py, which had no problem of its own


def test_two_deepspeed_scripts_in_one_folder_get_one_config_each(two_scripts: Path) -> None:
    text = (two_scripts / "b.py").read_text()
    (two_scripts / "b.py").write_text(text.replace("batch_size=args.batch_size", "batch_size=7", 1))
    written = migrate("to-deepspeed", "--write", "a.py", "b.py", cwd=two_scripts)
    assert written.returncode == 0, written.stderr
    assert "2 scripts in this folder would share one DeepSpeed config: each gets its own ds_config_<script>.json" \
        in written.stderr
    assert '"ds_config_a.json"' in (two_scripts / "a.py").read_text()
    assert '"train_micro_batch_size_per_gpu": 7' in (two_scripts / "ds_config_b.json").read_text()
    assert not (two_scripts / "ds_config.json").exists()


def test_the_library_gives_two_deepspeed_scripts_of_a_folder_the_configs_the_cli_writes(two_scripts: Path) -> None:
    """migrate_paths settles a run as the command line does (one home: migrate.api.settle)."""
    from migrate import FileResult, migrate_paths

    results = [r for r in migrate_paths([str(two_scripts / "a.py"), str(two_scripts / "b.py")], "deepspeed")]
    assert all(isinstance(r, FileResult) for r in results)
    configs = sorted(Path(a.path).name for r in results if isinstance(r, FileResult) for a in r.artifacts if a.path.endswith(".json"))
    assert configs == ["ds_config_a.json", "ds_config_b.json"]
    diff = migrate("to-deepspeed", "a.py", "b.py", cwd=two_scripts)
    for result in results:
        assert isinstance(result, FileResult) and result.new.splitlines()[0] in diff.stdout
        assert f'"ds_config_{Path(result.path).stem}.json"' in result.new


def test_two_deepspeed_scripts_with_equal_settings_still_get_one_config_each(two_scripts: Path) -> None:
    """Tuning ds_config_a.json must never change how b.py trains."""
    written = migrate("to-deepspeed", "--write", "a.py", "b.py", cwd=two_scripts)
    assert written.returncode == 0, written.stderr
    assert '"ds_config_a.json"' in (two_scripts / "a.py").read_text()
    assert '"ds_config_b.json"' in (two_scripts / "b.py").read_text()
    assert (two_scripts / "ds_config_a.json").read_text() == (two_scripts / "ds_config_b.json").read_text()
    assert not (two_scripts / "ds_config.json").exists()


def test_two_scripts_told_to_share_one_config_they_disagree_on_write_nothing(two_scripts: Path) -> None:
    text = (two_scripts / "b.py").read_text()
    (two_scripts / "b.py").write_text(text.replace("batch_size=args.batch_size", "batch_size=7", 1))
    before = snapshot(two_scripts)
    diff = migrate("to-deepspeed", "--config-out", "shared.json", "a.py", "b.py", cwd=two_scripts)
    assert diff.returncode == 0
    assert "shared.json: --write would refuse: a.py and b.py would both write this file" in diff.stderr
    written = migrate("to-deepspeed", "--config-out", "shared.json", "--write", "a.py", "b.py", cwd=two_scripts)
    assert written.returncode == 2
    assert snapshot(two_scripts) == before


def test_a_users_own_ds_config_is_never_overwritten(two_scripts: Path) -> None:
    mine = '{"train_micro_batch_size_per_gpu": 3, "zero_optimization": {"stage": 1}}\n'
    (two_scripts / "ds_config.json").write_text(mine)
    refused = migrate("to-deepspeed", "--write", "a.py", cwd=two_scripts)
    assert refused.returncode == 2 and "--config-out" in refused.stderr
    assert (two_scripts / "ds_config.json").read_text() == mine
    assert "deepspeed" not in (two_scripts / "a.py").read_text()
    beside = migrate("to-deepspeed", "--write", "--config-out", "ds_config.generated.json", "a.py", cwd=two_scripts)
    assert beside.returncode == 0, beside.stderr
    assert (two_scripts / "ds_config.json").read_text() == mine
    assert '"ds_config.generated.json"' in (two_scripts / "a.py").read_text()


def test_config_out_naming_the_script_or_a_folder_is_refused(two_scripts: Path) -> None:
    before = snapshot(two_scripts)
    itself = migrate("to-deepspeed", "--write", "--config-out", "a.py", "a.py", cwd=two_scripts)
    assert itself.returncode == 2 and "a.py: would be overwritten by a file generated for a.py" in itself.stderr
    (two_scripts / "configs").mkdir()
    folder = migrate("to-deepspeed", "--write", "--config-out", "configs", "a.py", cwd=two_scripts)
    assert folder.returncode == 2 and "is a folder" in folder.stderr
    assert snapshot(two_scripts) == before


def test_generated_files_are_written_before_the_script_and_a_rerun_finishes_the_job(two_scripts: Path) -> None:
    result = api.migrate_file(str(two_scripts / "a.py"), "deepspeed")
    assert isinstance(result, FileResult)
    plan = writing.plan([result])
    assert [Path(o.path).name for o in plan.batches[0]] == ["ds_config.json", "run_a_deepspeed.sh", "a.py"]
    writing.write(plan.batches[0][:-1])  # as if a run had been killed just before the script was renamed
    rerun = migrate("to-deepspeed", "--write", "a.py", cwd=two_scripts)
    assert rerun.returncode == 0, rerun.stderr
    assert "deepspeed.initialize(" in (two_scripts / "a.py").read_text()


def test_an_edit_saved_during_the_conversion_is_not_overwritten(two_scripts: Path) -> None:
    script = two_scripts / "a.py"
    result = api.migrate_file(str(script), "ddp")
    assert isinstance(result, FileResult)
    script.write_text(script.read_text() + "# an edit saved meanwhile\n")
    plan = writing.plan([result])
    assert [p.message for p in plan.problems] == ["changed on disk since it was read (run again)"]
    clean = writing.plan([api.migrate_file(str(two_scripts / "b.py"), "ddp")])  # type: ignore[list-item]
    (two_scripts / "b.py").write_text("# edited between the check and the rename\n")
    with pytest.raises(InputError, match="changed on disk since it was read"):
        writing.write(clean.batches[0])
    assert (two_scripts / "b.py").read_text() == "# edited between the check and the rename\n"
    assert not [p for p in two_scripts.iterdir() if p.name.startswith(".migrate-")]


def test_an_interrupted_write_leaves_no_temporary_file(two_scripts: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = api.migrate_file(str(two_scripts / "a.py"), "ddp")
    plan = writing.plan([result])  # type: ignore[list-item]

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        writing.write(plan.batches[0])
    assert not [p for p in two_scripts.iterdir() if p.name.startswith(".migrate-")]
    assert (two_scripts / "a.py").read_bytes() == SCRIPT.read_bytes()


def test_a_symlinked_script_is_converted_through_the_link(tmp_path: Path) -> None:
    real = tmp_path / "code" / "train.py"
    real.parent.mkdir()
    shutil.copy(SCRIPT, real)
    (tmp_path / "train.py").symlink_to(real)
    result = migrate("to-ddp", "--write", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "train.py").is_symlink()
    assert "dist.init_process_group(" in real.read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_owner_group_mode_and_extended_attributes_are_kept(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    shutil.copy(SCRIPT, script)
    os.chown(script, 4321, 4322)
    script.chmod(0o640)
    try:
        os.setxattr(script, "user.reviewed-by", b"alice")
    except OSError:
        pytest.skip("this file system has no user extended attributes")
    result = migrate("to-ddp", "--write", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    info = script.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o640)
    assert os.getxattr(script, "user.reviewed-by") == b"alice"


def test_a_hard_linked_script_is_replaced_under_its_name_only_and_says_so(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    shutil.copy(SCRIPT, script)
    os.link(script, tmp_path / "train_link.py")
    result = migrate("to-ddp", "--write", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "train.py has 2 hard links: the converted file replaces this name only" in result.stderr
    assert (tmp_path / "train_link.py").read_bytes() == SCRIPT.read_bytes()


def test_generated_files_follow_the_umask(tmp_path: Path) -> None:
    shutil.copy(SCRIPT, tmp_path / "train.py")
    command = f"umask 077 && {sys.executable} -m migrate to-deepspeed --write train.py"
    result = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((tmp_path / "run_train_deepspeed.sh").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "ds_config.json").stat().st_mode) == 0o600


def test_a_read_only_folder_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    shutil.copy(SCRIPT, folder / "train.py")
    folder.chmod(0o555)
    try:
        result = migrate("to-ddp", "--write", "locked/train.py", cwd=tmp_path)
    finally:
        folder.chmod(0o755)
    if os.geteuid() == 0:
        assert result.returncode == 0  # root may write anywhere; nothing to refuse
        return
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "cannot create a file in" in result.stderr
