"""How a verification is printed: text for a terminal, markdown for a pull request, json for tools.

The JSON shape is stable (documented in README.md, "migrate verify"):
{"script", "target", "status": passed|failed|error, "message", "steps", "nproc",
 "checks": [{"name", "title", "status": passed|failed|skipped|expected, "detail": [str]}],
 "notes": [str],  # files verify did not copy (a FIFO, a link loop...), or a warning
 "findings": [{"code", "severity", "line", "col", "message"}]}
An error (bad input, a --keep folder refused) is the same object with status "error", its message
and no checks.
"""

from __future__ import annotations

import json

from migrate.verify.checks import VerifyResult

MARKS = {"passed": "ok", "failed": "FAILED", "skipped": "skipped", "expected": "expected"}


def as_text(result: VerifyResult) -> str:
    lines = [f"migrate verify: {result.script} ({result.target}, {result.nproc} processes, {result.steps} steps)"]
    lines += [f"  note: {note}" for note in result.notes]
    for check in result.checks:
        lines.append(f"  {MARKS[check.status]:<9}{check.as_dict()['title']}")
        lines += [f"           {line}" for detail in check.detail for line in detail.splitlines()]
    lines.append(f"{result.status}: {result.message}")
    return "\n".join(lines) + "\n"


def as_markdown(result: VerifyResult) -> str:
    lines = [f"### migrate verify: `{result.script}` ({result.target})", "", "| check | result | what was seen |",
             "|---|---|---|"]
    for check in result.checks:
        seen = "<br>".join(d.replace("|", "\\|").replace("\n", "<br>") for d in check.detail)
        lines.append(f"| {check.as_dict()['title']} | {MARKS[check.status]} | {seen} |")
    if result.notes:
        lines += ["", *[f"- note: {note}" for note in result.notes]]
    lines += ["", f"**{result.status}**: {result.message}"]
    return "\n".join(lines) + "\n"


def as_json(result: VerifyResult) -> str:
    return json.dumps(result.as_dict(), indent=2) + "\n"


RENDER = {"text": as_text, "markdown": as_markdown, "json": as_json}
