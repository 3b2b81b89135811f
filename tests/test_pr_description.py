"""Reports for pull requests, continued: `--report markdown` as a pull-request description
(migrate/review/description.py: per file each change's lines and why, its findings, the files
created, the launch command, verify's result from --verify-report), and `migrate check --report
sarif` validated against the SARIF 2.1.0 schema as tests/test_review_reports.py validates the to-*
commands'. Conversion only, in this process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migrate.check_command import check
from migrate.launchers import TORCHRUN
from migrate.cli import run
from migrate import DdpOptions
from migrate.records import Artifact, FileResult, Finding, Severity
from migrate.review.description import Run, description
from migrate.review.hunks import hunks, text_lines
from migrate.review.sarif import Rule, sarif_log
from migrate.review.why import reason
from migrate.targets import targets
from tests.test_review_reports import SARIF_SCHEMA, validate

ROOT = Path(__file__).resolve().parent.parent
DDP = Run("ddp", "DistributedDataParallel", "torchrun", TORCHRUN.several_nodes_example)


def markdown_of(sample: str, target: str, tmp_path: Path, *extra: str) -> tuple[int, str]:
    """`migrate to-<target> --report markdown --report-out ... samples/<sample>/train.py`, run from the root."""
    out = tmp_path / "description.md"
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        status = run(target, [f"samples/{sample}/train.py"], targets()[target].options_class(), write=False, check=False,
                     report="markdown", report_out=str(out), verify_report=extra[0] if extra else None)
    finally:
        os.chdir(here)
    return status, out.read_text() if out.exists() else ""


@pytest.mark.parametrize("target", tuple(targets()))
def test_the_description_names_every_change_finding_created_file_and_the_launch(tmp_path: Path, target: str,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from migrate import api

    status, text = markdown_of("mlp_regression", target, tmp_path)
    capsys.readouterr()  # the diff
    result = api.migrate_file(str(ROOT / "samples/mlp_regression/train.py"), target)
    assert status == 0 and isinstance(result, FileResult)
    new = text_lines(result.new)
    for hunk in hunks(text_lines(result.old), new):
        assert reason(new[hunk.new_start:hunk.new_stop], targets()[target].framework) in text
    for finding in result.findings:
        assert f"{finding.code} ({finding.severity.value}): {finding.message}" in text
    launcher = targets()[target].launcher
    if launcher is None:
        assert "python samples/mlp_regression/train.py" in text and "Files created" not in text
    else:
        name = f"samples/mlp_regression/run_train_{target}.sh"
        assert f"- `{name}`: Launches train.py with " in text
        assert f"bash {name}\n" in text and f"migrate launch {target} samples/mlp_regression/train.py" in text
    if target == "deepspeed":
        assert "- `samples/mlp_regression/ds_config.json`: the DeepSpeed config" in text
        assert "NUM_GPUS=4 samples/mlp_regression/run_train_deepspeed.sh" in text
    assert "| file | line |" not in text and "\n\n\n" not in text


def test_no_empty_section_and_findings_on_no_change_at_their_converted_line() -> None:
    plain = FileResult("a.py", "a\nb\nc\n", "import os\na\nb\nc\n")
    text = description([plain], DDP)
    assert "- line 1: Imports what the changes below use." in text
    assert "Findings" not in text and "Files created" not in text and "migrate verify" not in text
    noted = FileResult("a.py", "a\nb\nc\n", "import os\na\nb\nc\n", findings=(Finding("MIG004", Severity.NOTE, "m", 3, 1),))
    assert "Findings on no change:\n- line 4: MIG004 (note): m" in description([noted], DDP)
    on_change = FileResult("a.py", "a\nb\n", "a\nif dist.get_rank() == 0:\n    b\n",
                           findings=(Finding("MIG101", Severity.WARNING, "shard it", 2, 1),))
    assert ("- lines 2-3: Prints and writes files on rank 0 only, once instead of once per rank.\n"
            "  - MIG101 (warning): shard it") in description([on_change], DDP)
    left = FileResult("b.py", "x\n", "x\n", skipped=True, findings=(Finding("MIG001", Severity.NOTE, "on DDP", 1, 1),))
    assert description([left], DDP).endswith("### `b.py` (left unchanged)\n\nFindings:\n- line 1: MIG001 (note): on DDP\n")
    assert description([], DDP).endswith("Nothing to change.\n")


def test_a_created_launcher_and_its_command(tmp_path: Path) -> None:
    launcher = Artifact("run_a_ddp.sh", "#!/usr/bin/env bash\n# Launches a.py with torchrun: details\n"
                        'exec torchrun --nproc-per-node="${NPROC_PER_NODE:-auto}" a.py "$@"\n', executable=True)
    text = description([FileResult("a.py", "a\n", "import os\na\n", artifacts=(launcher,))], DDP)
    assert "- `run_a_ddp.sh`: Launches a.py with torchrun\n" in text
    assert "```\nbash run_a_ddp.sh\nNPROC_PER_NODE=4 ./run_a_ddp.sh   # 4 processes\n```" in text
    assert "`migrate launch ddp a.py --nnodes 2 --nproc-per-node 8`" in text


VERIFIED = {"script": "samples/mlp_regression/train.py", "target": "ddp", "status": "passed", "message": "",
            "steps": 3, "nproc": 2, "checks": [{"name": "ranks_reach_steps", "title": "t", "status": "passed", "detail": ""},
                                               {"name": "params_identical", "title": "t", "status": "passed", "detail": ""}]}


def test_a_verify_report_is_summed_up_under_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "verify.json"
    report.write_text(json.dumps(VERIFIED))
    status, text = markdown_of("mlp_regression", "ddp", tmp_path, str(report))
    assert status == 0
    section = text.split("### `samples/mlp_regression/train.py`")[1]
    assert ("`migrate verify` of `samples/mlp_regression/train.py` (ddp, 2 processes, 3 steps): **passed**\n"
            "- ranks_reach_steps: passed\n- params_identical: passed\n") in section


@pytest.mark.parametrize("content, said", [("{", ":1:2: not JSON"), ('{"status": "passed"}', ": not a `migrate verify")])
def test_a_bad_verify_report_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                                  said: str) -> None:
    report = tmp_path / "verify.json"
    report.write_text(content)
    status, text = markdown_of("mlp_regression", "ddp", tmp_path, str(report))
    captured = capsys.readouterr()
    assert status == 2 and text == "" and captured.out == ""
    assert captured.err.startswith(f"migrate: {report}{said}")


def test_a_verify_report_needs_the_markdown_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "verify.json"
    report.write_text(json.dumps(VERIFIED))
    status = run("ddp", [str(ROOT / "samples/mlp_regression/train.py")], DdpOptions(), write=False, check=False,
                 report="text", verify_report=str(report))
    assert status == 2 and "--verify-report goes into the pull-request description" in capsys.readouterr().err


CHECKED = """
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.DataParallel(torch.nn.Linear(2, 2))
print("loss")
"""


def test_check_sarif_validates_with_each_rules_level_and_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from migrate.check.rules import RULES

    (tmp_path / "train.py").write_text(CHECKED)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(_app(), ["--report", "sarif", "train.py"])
    log = json.loads(result.stdout)
    assert result.exit_code == 1 and validate(log, SARIF_SCHEMA, SARIF_SCHEMA) == []
    rules = {r.code: r for r in RULES}
    driver = log["runs"][0]["tool"]["driver"]
    assert {"DC101", "DC401", "DC801"} <= {rule["id"] for rule in driver["rules"]}
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] == rules[rule["id"]].summary
        assert rule["defaultConfiguration"]["level"] == rules[rule["id"]].severity
    located = [r["locations"][0]["physicalLocation"] for r in log["runs"][0]["results"]]
    assert {loc["artifactLocation"]["uri"] for loc in located} == {"train.py"}
    assert ("DC101", 5) in {(r["ruleId"], loc["region"]["startLine"]) for r, loc in zip(log["runs"][0]["results"], located)}


def test_sarif_takes_the_callers_rules() -> None:
    entry = {"path": "a.py", "line": 2, "col": 1, "code": "X1", "severity": "error", "message": "m"}
    log = sarif_log([entry], "1", {"X1": Rule("error", "what X1 finds", "help of X1")})
    assert validate(log, SARIF_SCHEMA, SARIF_SCHEMA) == []
    assert log["runs"][0]["tool"]["driver"]["rules"] == [
        {"id": "X1", "shortDescription": {"text": "what X1 finds"}, "help": {"text": "help of X1"},
         "defaultConfiguration": {"level": "error"}}]


def _app():  # type: ignore[no-untyped-def]
    import typer

    app = typer.Typer()
    app.command()(check)
    return app
