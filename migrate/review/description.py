"""A conversion as a pull-request description (`--report markdown`): per file a heading, each change
(its line range in the converted file, changes with the same reason together) with one sentence of
why (why.py) and the findings on those lines; the findings on no change; the files created, one
line each; how to launch the result, on one node and on several; and, when a `migrate verify
--report json` document is given, its status and each check's in one line each. Nothing that does
not apply is printed: no empty list, no heading without lines under it.

Findings carry the original's line numbers (as github_review.py places them); a finding on no
change is shown at its line in the converted file, which the unchanged lines map one to one.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from migrate.records import Artifact, FileResult, Finding, InputError
from migrate.report import display_path
from migrate.review.hunks import Hunk, hunks, text_lines
from migrate.review.why import reason

# the variable each launcher template reads for its process count (read from the launcher's text)
COUNT_VARIABLE = re.compile(r"\$\{(NPROC_PER_NODE|NUM_GPUS|NUM_PROCESSES):[-+]")


@dataclass(frozen=True)
class Run:
    """What the description needs to know of the run: the target's CLI name, framework and launcher
    (its name, and the `migrate launch` options for two nodes: Launcher.several_nodes_example)."""

    target: str
    framework: str
    launcher: str | None
    several_nodes: str  # "" when the target has no launcher


def description(results: Iterable[FileResult], run: Run, verified: Mapping[str, object] | None = None,
                messages: Sequence[str] = ()) -> str:
    """The markdown of every file's conversion; `verified`: a verify JSON report; `messages`: the
    run's errors and notes, one line each."""
    sections = [_file_section(result, run, verified) for result in results if result.findings or result.changed]
    lines = [f"## torch-migrate: the conversion to {run.framework}"]
    for section in sections:
        lines += ["", *section]
    if verified is not None and not any(_verified_here(r, verified) for r in results if r.findings or r.changed):
        lines += ["", *_verify_lines(verified)]
    if messages:
        lines += ["", "**Errors and notes**", *(f"- {message}" for message in messages)]
    if not sections and not messages and verified is None:
        lines += ["", "Nothing to change."]
    return "\n".join(lines) + "\n"


def _file_section(result: FileResult, run: Run, verified: Mapping[str, object] | None) -> list[str]:
    name = display_path(result.path)
    old, new = text_lines(result.old), text_lines(result.new)
    found = hunks(old, new) if not result.error else []
    state = "converted" if found or result.artifacts else "left unchanged"
    lines = [f"### `{name}` ({state})"]
    left = list(result.findings)
    if found:
        lines += ["", "Changes (lines of the converted file):"]
        for why, group in _by_reason(found, new, run.framework):
            mine = [f for f in left if any(_on(f, hunk) for hunk in group)]
            left = [f for f in left if f not in mine]
            lines.append(f"- {_ranges(group)}: {why}")
            lines += [f"  - {_finding(f)}" for f in mine]
    if left:
        lines += ["", "Findings:" if not found else "Findings on no change:"]
        lines += [f"- line {_new_line(f.line, found)}: {_finding(f)}" if f.line else f"- {_finding(f)}" for f in left]
    if result.artifacts and not result.error:
        lines += ["", "Files created:", *(f"- {_created(a)}" for a in result.artifacts)]
    if (found or result.artifacts) and not result.error and not _edited_with_a_script(result):
        lines += ["", *_launch_lines(result, run)]
    if verified is not None and _verified_here(result, verified):
        lines += ["", *_verify_lines(verified)]
    return lines


def _by_reason(found: list[Hunk], new: list[str], framework: str) -> list[tuple[str, list[Hunk]]]:
    """The hunks grouped by their sentence of why, in the order each sentence first occurs."""
    groups: dict[str, list[Hunk]] = {}
    for hunk in found:
        groups.setdefault(reason(new[hunk.new_start:hunk.new_stop], framework), []).append(hunk)
    return list(groups.items())


def _ranges(group: list[Hunk]) -> str:
    """`lines 3-5, 9`; a deletion is named by the line after which it was (`removed after line 12`)."""
    spans = [_span(h) for h in group]
    label = "line" if len(group) == 1 and "-" not in spans[0] else "lines"
    return f"{label} {', '.join(spans)}"


def _span(hunk: Hunk) -> str:
    if hunk.new_start == hunk.new_stop:
        return f"{hunk.new_start} (removed after it)" if hunk.new_start else "1 (removed before it)"
    if hunk.new_stop - hunk.new_start == 1:
        return str(hunk.new_start + 1)
    return f"{hunk.new_start + 1}-{hunk.new_stop}"


def _on(finding: Finding, hunk: Hunk) -> bool:
    """Whether a finding (an original line) lies on the lines a hunk replaces, or, for an
    insertion, on the line before it (where a review comment attaches it)."""
    first = hunk.old_start + 1 if not hunk.insertion else max(hunk.old_start, 1)
    return first <= finding.line <= max(hunk.old_stop, first)


def _new_line(line: int, found: list[Hunk]) -> int:
    """An unchanged original line's number in the converted file."""
    shift = sum((h.new_stop - h.new_start) - (h.old_stop - h.old_start) for h in found if h.old_stop < line)
    return line + shift


def _finding(finding: Finding) -> str:
    return f"{finding.code} ({finding.severity.value}): {finding.message}"


def _created(artifact: Artifact) -> str:
    name = display_path(artifact.path)
    text = artifact.text
    if name.endswith(".json"):
        what = "the DeepSpeed config the converted script reads (batch size, precision, ZeRO stage)"
    elif artifact.executable or text.startswith("#!"):
        what = _comment_line(text) or "the launcher"
    elif "hostfile" in name:
        what = "the hosts and their GPU counts, for the launcher"
    else:
        what = _comment_line(text) or "a file the converted script needs"
    return f"`{name}`: {what}"


def _edited_with_a_script(result: FileResult) -> bool:
    """A module of a script's project edited with it (MIG132): launched through that script, not itself."""
    return any(f.code == "MIG132" for f in result.findings)


def _comment_line(text: str) -> str:
    """The first comment line after a shebang: what a generated launcher says it does."""
    for line in text.splitlines()[1:3]:
        if line.startswith("# "):
            return _first_clause(line[2:]).rstrip(".")
    return ""


def _first_clause(text: str) -> str:
    """The text up to its first `: ` or `; ` outside parentheses."""
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char in ":;" and text[index + 1:index + 2] == " ":
            return text[:index]
    return text


def _launch_lines(result: FileResult, run: Run) -> list[str]:
    """How to run the converted script: its launcher (with the count it reads), or python; and the
    `migrate launch` command for several nodes."""
    script = display_path(result.path)
    launcher = next((a for a in result.artifacts if a.executable), None)
    if launcher is None:
        return ["Launch:", "", "```", f"python {shlex.quote(script)}", "```"]
    name = shlex.quote(display_path(launcher.path))
    run_it = name if "/" in name else f"./{name}"
    commands = [f"bash {name}"]
    count = COUNT_VARIABLE.search(launcher.text)
    if count:
        commands.append(f"{count.group(1)}=4 {run_it}   # 4 processes")
    several = run.several_nodes
    lines = ["Launch (arguments for the script go after the launcher's name):", "", "```", *commands, "```"]
    lines.append(f"Several nodes: `migrate launch {run.target} {shlex.quote(script)} {several}` writes their launcher.")
    return lines


def read_verify_report(path: str) -> dict[str, object]:
    """A `migrate verify --report json` document, read and checked; InputError naming `path` otherwise."""
    try:
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
    except OSError as error:
        raise InputError(path, 0, 0, f"cannot read the verify report: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        line, col = (error.lineno, error.colno) if isinstance(error, json.JSONDecodeError) else (0, 0)
        raise InputError(path, line, col, f"not JSON (give what `migrate verify --report json` printed): {error}") from None
    if not isinstance(data, dict) or not {"script", "status", "checks"} <= data.keys() or not isinstance(data["checks"], list):
        raise InputError(path, 0, 0, "not a `migrate verify --report json` report (it needs script, status and checks)")
    return data


def _verified_here(result: FileResult, verified: Mapping[str, object]) -> bool:
    return display_path(str(verified.get("script", ""))) == display_path(result.path)


def _verify_lines(verified: Mapping[str, object]) -> list[str]:
    """`migrate verify`'s result: the status, then each check's name and status, one line each."""
    script = display_path(str(verified.get("script", "")))
    nproc, steps = verified.get("nproc"), verified.get("steps")
    how = f", {nproc} processes, {steps} steps" if nproc and steps else ""
    lines = [f"`migrate verify` of `{script}` ({verified.get('target', '?')}{how}): **{verified.get('status')}**"]
    message = str(verified.get("message") or "")
    if message:
        lines.append(f"  {message}")
    checks = verified.get("checks")
    for check in checks if isinstance(checks, list) else []:
        if isinstance(check, dict):
            lines.append(f"- {check.get('name')}: {check.get('status')}")
    return lines
