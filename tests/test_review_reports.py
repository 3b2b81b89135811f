"""Reports for review (migrate/review/): SARIF validated against the SARIF 2.1.0 schema, the
GitHub review whose suggestions, applied as GitHub applies them, give exactly the `--write`
output, the JSON report against its schema (migrate/schemas/report.schema.json), and
`--report-out`. Conversion only: every sample is converted once per target, in this process.

jsonschema is not installed here, so `validate` below checks the draft-04 keywords the two
schemas use (type, enum, required, properties, additionalProperties, items, minItems,
uniqueItems, minimum, maximum, minLength, pattern, anyOf, oneOf, $ref); `format` is not checked,
as jsonschema does not check it by default either.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from migrate import api
from migrate.cli import Output, _report_requested, run
from migrate import DdpOptions
from migrate.records import Artifact, FileResult, Finding, Severity
from migrate.review.github_review import review
from migrate.targets import targets

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "samples").glob("*/train.py"))
TARGETS = tuple(targets())
SARIF_SCHEMA = json.loads((ROOT / "tests" / "schemas" / "sarif-schema-2.1.0.json").read_text())
REPORT_SCHEMA = json.loads((ROOT / "migrate" / "schemas" / "report.schema.json").read_text())
TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
                         "number": (int, float), "integer": int}


def validate(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> list[str]:
    """The problems of `value` against a draft-04 `schema` (see the module docstring)."""
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return validate(value, target, root, where)
    problems = _type_problems(value, schema, where)
    if problems:
        return problems
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    for name, check in (("anyOf", lambda n: n >= 1), ("oneOf", lambda n: n == 1)):
        if name in schema and not check(sum(not validate(value, s, root, where) for s in schema[name])):
            problems.append(f"{where}: {name} not satisfied")
    if isinstance(value, dict):
        problems += _object_problems(value, schema, root, where)
    elif isinstance(value, list):
        problems += _array_problems(value, schema, root, where)
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or ("pattern" in schema and not re.search(schema["pattern"], value)):
            problems.append(f"{where}: {value!r} does not match {schema.get('pattern') or 'minLength'}")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            problems.append(f"{where}: {value} out of range")
    return problems


def _type_problems(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    if "type" not in schema:
        return []
    names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    fits = any(isinstance(value, TYPES[n]) and not (isinstance(value, bool) and n in ("integer", "number")) for n in names)
    return [] if fits else [f"{where}: {type(value).__name__} is not {names}"]


def _object_problems(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], where: str) -> list[str]:
    problems = [f"{where}: {name} missing" for name in schema.get("required", []) if name not in value]
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            problems += validate(item, properties[key], root, f"{where}.{key}")
        elif extra is False:
            problems.append(f"{where}: unexpected {key}")
        elif isinstance(extra, dict):
            problems += validate(item, extra, root, f"{where}.{key}")
    return problems


def _array_problems(value: list[Any], schema: dict[str, Any], root: dict[str, Any], where: str) -> list[str]:
    problems = [f"{where}: fewer than {schema['minItems']} items"] if len(value) < schema.get("minItems", 0) else []
    if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) < len(value):
        problems.append(f"{where}: items not unique")
    for index, item in enumerate(value):
        problems += validate(item, schema.get("items", {}), root, f"{where}[{index}]")
    return problems


def apply_suggestions(original: str, comments: list[dict[str, Any]]) -> str:
    """What GitHub does when every suggestion is accepted: lines start_line..line (1-based, of the
    PR's version of the file) are replaced by the suggestion block's lines."""
    lines = original.split("\n")
    ending = original.endswith("\n")
    if ending:
        lines.pop()
    for comment in sorted(comments, key=lambda c: c["line"], reverse=True):
        assert comment["side"] == "RIGHT" and comment.get("start_side", "RIGHT") == "RIGHT"
        start = comment.get("start_line", comment["line"])
        assert start < comment["line"] or "start_line" not in comment, "a one-line comment has no start_line"
        lines[start - 1:comment["line"]] = suggested_lines(comment["body"])
    return "\n".join(lines) + ("\n" if ending and lines else "")


def suggested_lines(body: str) -> list[str]:
    match = re.match(r"(`{3,})suggestion\n(.*?)^\1$", body, re.DOTALL | re.MULTILINE)
    assert match, body
    return match.group(2).split("\n")[:-1]


@pytest.fixture(scope="module")
def converted() -> dict[tuple[str, str], FileResult]:
    """Every sample converted for every target, as `migrate to-<target> samples/x/train.py` from the root."""
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        results = {(sample, target): api.migrate_file(sample, target) for sample in SAMPLES for target in TARGETS}
    finally:
        os.chdir(here)
    assert all(isinstance(r, FileResult) for r in results.values())
    return results  # type: ignore[return-value]


def _in_root(report: str, target: str, results: list[FileResult]) -> Any:
    """The report document of `results` as a run from the repository root prints it."""
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        return json.loads(Output(report, targets()[target].framework).document(results))
    finally:
        os.chdir(here)


def test_sarif_of_every_sample_and_target_validates_against_the_sarif_schema(converted: dict[tuple[str, str], FileResult]) -> None:
    for target in TARGETS:
        results = [converted[(sample, target)] for sample in SAMPLES]
        log = _in_root("sarif", target, results)
        assert validate(log, SARIF_SCHEMA, SARIF_SCHEMA) == [], target
        run_ = log["runs"][0]
        findings = [(r.path, f) for r in results for f in r.findings]
        assert run_["tool"]["driver"]["name"] == "torch-migrate" and run_["tool"]["driver"]["version"]
        assert [rule["id"] for rule in run_["tool"]["driver"]["rules"]] == sorted({f.code for _, f in findings})
        located = [(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                    r["locations"][0]["physicalLocation"]["region"]["startLine"], r["ruleId"], r["level"])
                   for r in run_["results"]]
        assert located == [(path, f.line, f.code, f.severity.value) for path, f in findings]
        for result in run_["results"]:
            assert run_["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def test_the_sarif_check_catches_a_broken_log() -> None:
    """The hand-written validator is not a test that cannot fail: it rejects what the schema rejects."""
    log = _in_root("sarif", "ddp", [FileResult("a.py", "x\n", "x\n", findings=(Finding("MIG101", Severity.WARNING, "m", 3, 1),))])
    assert validate(log, SARIF_SCHEMA, SARIF_SCHEMA) == []
    region = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 3, "startColumn": 1}
    region["startLine"] = 0  # SARIF lines start at 1
    log["runs"][0]["results"][0]["level"] = "fatal"
    log["runs"][0]["tool"]["driver"]["colour"] = "red"
    problems = validate(log, SARIF_SCHEMA, SARIF_SCHEMA)
    assert any("startLine" in p for p in problems) and any("fatal" in p for p in problems)
    assert any("colour" in p for p in problems)


def test_a_finding_without_a_line_and_a_run_note_have_no_region() -> None:
    result = FileResult("sub dir/a.py", "x\n", "x\n", findings=(Finding("MIG002", Severity.NOTE, "not training"),))
    out = Output("sarif", "DistributedDataParallel")
    out.note("", "about the whole run")
    log = json.loads(out.document([result]))
    assert validate(log, SARIF_SCHEMA, SARIF_SCHEMA) == []
    first, second = log["runs"][0]["results"]
    assert first["locations"][0]["physicalLocation"] == {"artifactLocation": {"uri": "sub%20dir/a.py", "uriBaseId": "%SRCROOT%"}}
    assert "locations" not in second and second["ruleId"] == "MIG005"


@pytest.mark.parametrize("target", TARGETS)
def test_every_suggestion_applied_gives_the_write_output(converted: dict[tuple[str, str], FileResult], target: str) -> None:
    for sample in SAMPLES:
        result = converted[(sample, target)]
        body = _in_root("github-review", target, [result])
        assert body["event"] == "COMMENT"
        comments = body["comments"]
        assert all(c["path"] == sample for c in comments)
        assert apply_suggestions(result.old, comments) == result.new, f"{sample} {target}"
        assert "no suggestion can carry" not in body["body"], sample
        spans = sorted((c.get("start_line", c["line"]), c["line"]) for c in comments)
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:])), f"overlapping comments in {sample}"
        for artifact in result.artifacts:
            assert f"create `{os.path.relpath(artifact.path, ROOT)}`" in body["body"]
            assert artifact.text.rstrip("\n") in body["body"]
        for finding in result.findings:
            assert finding.message in body["body"] + "".join(c["body"] for c in comments)


@pytest.mark.parametrize(("old", "new"), [
    ("a\nb\nc\n", "top\na\nb\nc\n"),  # an insertion before the first line
    ("a\nb\nc\n", "a\nb\nc\nend\nmore\n"),  # an insertion after the last line
    ("a\nb\nc\nd\n", "a\nd\n"),  # a deletion: an empty suggestion
    ("a\nb\nc\n", "A\nb\nC\nc2\n"),  # a replacement, then a replacement with more lines
    ("a\n```\nb\n", "a\n```\nb2\n"),  # a fence inside the file: the suggestion's fence is longer
])
def test_suggestions_cover_insertions_at_either_end_and_deletions(old: str, new: str) -> None:
    body = review([FileResult("t.py", old, new)], "DistributedDataParallel")
    assert apply_suggestions(old, body["comments"]) == new  # type: ignore[arg-type]


def test_what_no_suggestion_carries_goes_in_the_review_body() -> None:
    result = FileResult("t.py", "a\nb", "a\nb\nc\n", findings=(Finding("MIG101", Severity.WARNING, "shard by hand", 1, 1),),
                        artifacts=(Artifact("run_t_ddp.sh", "#!/bin/sh\ntorchrun t.py\n", True),))
    body = review([result], "DistributedDataParallel", ["a note of the run"])
    assert body["comments"] == []
    text = str(body["body"])
    assert "no suggestion can carry" in text and "+c" in text
    assert "create `run_t_ddp.sh` (executable)" in text and "torchrun t.py" in text
    assert "MIG101" in text and "a note of the run" in text


def test_a_comment_says_why_and_names_the_findings_on_its_lines() -> None:
    old = "loader = DataLoader(ds, shuffle=True)\n"
    new = "loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=True))\n"
    finding = Finding("MIG004", Severity.NOTE, "the sampler shuffles", 1, 10)
    comment = review([FileResult("t.py", old, new, findings=(finding,))], "DistributedDataParallel")["comments"][0]  # type: ignore[index]
    assert "Gives each rank its own shard of the training data." in comment["body"]
    assert "MIG004 (note): the sampler shuffles (line 1)" in comment["body"]


def test_the_json_report_of_every_sample_validates_against_its_schema(converted: dict[tuple[str, str], FileResult]) -> None:
    for target in TARGETS:
        entries = _in_root("json", target, [converted[(sample, target)] for sample in SAMPLES])
        assert entries and validate(entries, REPORT_SCHEMA, REPORT_SCHEMA) == [], target
    assert validate([{"path": "a.py", "line": 1, "col": 1, "code": "MIG1", "severity": "note", "message": "m"}],
                    REPORT_SCHEMA, REPORT_SCHEMA) != []


def test_report_out_writes_the_report_and_keeps_stderr_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.py").write_text("def broken(:\n")
    monkeypatch.chdir(tmp_path)
    status = run("ddp", ["bad.py"], DdpOptions(), write=False, check=False, report="json", report_out="out/report.json")
    assert status == 2 and capsys.readouterr().err == ""
    entries = json.loads((tmp_path / "out" / "report.json").read_text())
    assert validate(entries, REPORT_SCHEMA, REPORT_SCHEMA) == []
    assert [(e["path"], e["code"]) for e in entries] == [("bad.py", "MIG900")]
    status = run("ddp", ["bad.py"], DdpOptions(), write=False, check=False, report="sarif", report_out="out/report.json")
    log = json.loads((tmp_path / "out" / "report.json").read_text())
    assert validate(log, SARIF_SCHEMA, SARIF_SCHEMA) == [] and log["runs"][0]["results"][0]["level"] == "error"


@pytest.mark.parametrize("where", ["train.py", "run_train_ddp.sh", "."])
def test_report_out_refuses_a_script_a_generated_file_or_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str], where: str) -> None:
    source = (ROOT / "samples" / "mlp_regression" / "train.py").read_text()
    (tmp_path / "train.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    status = run("ddp", ["train.py"], DdpOptions(), write=True, check=False, report="sarif", report_out=where)
    assert status == 2
    assert f"{where}: --report-out names a" in capsys.readouterr().err
    assert (tmp_path / "train.py").read_text() == source and not (tmp_path / "run_train_ddp.sh").exists()


def test_the_report_format_is_read_from_either_spelling_and_the_last_counts() -> None:
    assert _report_requested(["to-ddp", "--report", "sarif", "x.py"]) == "sarif"
    assert _report_requested(["to-ddp", "--report=json", "--report", "sarif"]) == "sarif"
    assert _report_requested(["to-ddp", "x.py", "--", "--report", "json"]) is None
