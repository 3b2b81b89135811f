"""Findings as a SARIF 2.1.0 log (one run), the format code scanning shows inline on a pull request.

The input is a run's report entries (path, line, col, code, severity, message: as `--report json`
lists them for the to-* commands, and as `migrate check --report json` lists its violations) and
the rules they come from: each code's level, description and help, given by the caller (by
default the MIG codes of migrate.findings; `migrate check` gives its DC rules). Rules are the codes
that occur, with the code as the stable rule id; each result has the level of its entry's
severity and, where the entry names a file, a location relative to `%SRCROOT%` (the folder the
command ran in), with its line and column when they are known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from migrate.findings import all_codes
import migrate.targets  # noqa: F401  (building the registry declares each target's codes to migrate.findings)
from migrate.report import display_path

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"note": "note", "warning": "warning", "error": "error"}


@dataclass(frozen=True)
class Rule:
    """What SARIF says of a code: its default level (note, warning or error), a one-line
    description, and the help text code scanning shows beside a result."""

    level: str
    description: str
    help: str


def finding_rules() -> dict[str, Rule]:
    """The MIG codes of the to-* commands (migrate.findings), as rules."""
    return {code: Rule(LEVELS[severity.value], meaning, _help(code, meaning))
            for code, (severity, meaning) in all_codes().items()}


def _help(code: str, meaning: str) -> str:
    return f"{code}: {meaning}. README.md lists every code and what to do about it."


def sarif_log(entries: Sequence[Mapping[str, object]], version: str,
              rules: Mapping[str, Rule] | None = None) -> dict[str, object]:
    """The SARIF log of a run's entries; `version`: torch-migrate's version; `rules`: each code's
    rule (default: the MIG codes, finding_rules)."""
    known = finding_rules() if rules is None else rules
    codes = sorted({str(entry["code"]) for entry in entries})
    driver = {"name": "torch-migrate", "version": version, "rules": [_rule(code, known.get(code)) for code in codes]}
    index = {code: position for position, code in enumerate(codes)}
    results = [_result(entry, index[str(entry["code"])]) for entry in entries]
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}


def _rule(code: str, known: Rule | None) -> dict[str, object]:
    """A rule per code: its description and help, its level as default level (an unknown code:
    the code itself, and no default level)."""
    rule: dict[str, object] = {"id": code, "shortDescription": {"text": known.description if known else code},
                               "help": {"text": known.help if known else _help(code, code)}}
    if known:
        rule["defaultConfiguration"] = {"level": known.level}
    return rule


def installed_version() -> str:
    """torch-migrate's installed version, or a word saying it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch-migrate")
    except PackageNotFoundError:
        return "unknown (not installed)"


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
