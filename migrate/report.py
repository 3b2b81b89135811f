"""Turns FileResults into what people read: a unified diff that `git apply` accepts (a/ b/
prefixes, created files as /dev/null diffs with their mode), and findings as text, markdown
or JSON.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable

from migrate.model import FileResult, Finding

NO_NEWLINE = "\\ No newline at end of file\n"


def display_path(path: str) -> str:
    """The path as the diff names it: relative to the current directory, with / separators."""
    relative = os.path.relpath(path) if os.path.isabs(path) else os.path.normpath(path)
    return relative.replace(os.sep, "/")


def file_diff(old: str, new: str, path: str) -> str:
    if old == new:
        return ""
    name = display_path(path)
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}"
    )
    return f"diff --git a/{name} b/{name}\n" + _terminate(lines)


def new_file_diff(text: str, path: str, executable: bool) -> str:
    name = display_path(path)
    body = text.splitlines(keepends=True)
    header = (
        f"diff --git a/{name} b/{name}\n"
        f"new file mode {'100755' if executable else '100644'}\n"
        f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1,{len(body)} @@\n"
    )
    return header + _terminate("+" + line for line in body)


def _terminate(lines: Iterable[str]) -> str:
    """Join diff lines, marking a last line that has no newline the way git does."""
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_NEWLINE)
    return "".join(out)


def result_diff(result: FileResult) -> str:
    parts = [file_diff(result.old, result.new, result.path)]
    for artifact in result.artifacts:
        if os.path.exists(artifact.path):
            with open(artifact.path, encoding="utf-8", newline="") as stream:
                parts.append(file_diff(stream.read(), artifact.text, artifact.path))
        else:
            parts.append(new_file_diff(artifact.text, artifact.path, artifact.executable))
    return "".join(parts)


def findings_text(result: FileResult) -> list[str]:
    return [f.render(display_path(result.path)) for f in result.findings]


def findings_json(results: Iterable[FileResult]) -> str:
    return json.dumps(
        [{"path": display_path(r.path), **_finding_dict(f)} for r in results for f in r.findings], indent=2
    )


def findings_markdown(results: Iterable[FileResult]) -> str:
    rows = ["| file | line | code | severity | message |", "|---|---|---|---|---|"]
    for result in results:
        for f in result.findings:
            message = f.message.replace("|", "\\|")
            rows.append(f"| {display_path(result.path)} | {f.line} | {f.code} | {f.severity.value} | {message} |")
    return "\n".join(rows) + "\n"


def _finding_dict(finding: Finding) -> dict[str, object]:
    return {"line": finding.line, "col": finding.col, "code": finding.code,
            "severity": finding.severity.value, "message": finding.message}
