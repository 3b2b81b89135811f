"""Findings as a SARIF 2.1.0 log (one run), the format code scanning shows inline on a pull request.

The input is the run's report entries, as `--report json` lists them (path, line, col, code,
severity, message). Rules are the MIG codes that occur, with the code as the stable rule id and the
code's meaning (migrate.findings) as description and help; each result has the level of its
finding's severity and, where the entry names a file, a location relative to `%SRCROOT%` (the
folder the command ran in), with its line and column when they are known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import quote

from migrate.findings import all_codes
from migrate.report import display_path

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"note": "note", "warning": "warning", "error": "error"}


def sarif_log(entries: Sequence[Mapping[str, object]], version: str) -> dict[str, object]:
    """The SARIF log of a run's entries; `version`: torch-migrate's version."""
    codes = sorted({str(entry["code"]) for entry in entries})
    driver = {"name": "torch-migrate", "version": version, "rules": [_rule(code) for code in codes]}
    index = {code: position for position, code in enumerate(codes)}
    results = [_result(entry, index[str(entry["code"])]) for entry in entries]
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}


def _rule(code: str) -> dict[str, object]:
    """A rule per code: its meaning as description and help, its severity as default level."""
    known = all_codes().get(code)
    meaning = known[1] if known else code
    rule: dict[str, object] = {"id": code, "shortDescription": {"text": meaning},
                               "help": {"text": f"{code}: {meaning}. README.md lists every code and what to do about it."}}
    if known:
        rule["defaultConfiguration"] = {"level": LEVELS[known[0].value]}
    return rule


def _result(entry: Mapping[str, object], rule_index: int) -> dict[str, object]:
    result: dict[str, object] = {"ruleId": entry["code"], "ruleIndex": rule_index,
                                 "level": LEVELS.get(str(entry["severity"]), "none"),
                                 "message": {"text": entry["message"]}}
    path = str(entry["path"])
    if path and not path.startswith("<"):  # "" or "<stdout>": about the run, not a file
        result["locations"] = [{"physicalLocation": _physical(display_path(path), entry)}]
    return result


def _physical(path: str, entry: Mapping[str, object]) -> dict[str, object]:
    location: dict[str, object] = {"artifactLocation": {"uri": quote(path), "uriBaseId": "%SRCROOT%"}}
    line, col = entry.get("line"), entry.get("col")
    if isinstance(line, int) and line >= 1:
        region: dict[str, object] = {"startLine": line}
        if isinstance(col, int) and col >= 1:
            region["startColumn"] = col
        location["region"] = region
    return location
