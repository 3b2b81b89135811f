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

NO_NEWLINE = b"\\ No newline at end of file\n"


def display_path(path: str, base: str | None = None) -> str:
    """The path as findings and diffs name it: relative to `base` (the current folder by default),
    with / separators."""
    if base is not None:
        relative = os.path.relpath(os.path.abspath(path), base)
    else:
        relative = os.path.relpath(path) if os.path.isabs(path) else os.path.normpath(path)
    return relative.replace(os.sep, "/")


def diff_base(paths: Iterable[str]) -> str:
    """The folder a diff's names are relative to: the current one, or, when a file lies outside it
    (`git apply` refuses `../` names), the deepest folder that holds every file."""
    here = os.getcwd()
    folders = [os.path.dirname(os.path.abspath(p)) for p in paths]
    if all(os.path.commonpath([here, folder]) == here for folder in folders):
        return here
    return os.path.commonpath(folders) if folders else here


def lines_of(data: bytes) -> list[bytes]:
    """Lines as git sees them: split at LF only (a CR, a form feed or U+2028 stays inside a line)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def file_diff(old: bytes, new: bytes, name: str) -> bytes:
    """A `git apply`-able diff of one file's bytes, in the file's own encoding."""
    if old == new:
        return b""
    encoded = os.fsencode(name)
    lines = difflib.diff_bytes(difflib.unified_diff, lines_of(old), lines_of(new), b"a/" + encoded, b"b/" + encoded)
    return b"diff --git a/" + encoded + b" b/" + encoded + b"\n" + _terminate(lines)


def new_file_diff(data: bytes, name: str, executable: bool) -> bytes:
    encoded = os.fsencode(name)
    body = lines_of(data)
    header = (
        b"diff --git a/" + encoded + b" b/" + encoded + b"\n"
        + (b"new file mode 100755\n" if executable else b"new file mode 100644\n")
        + b"--- /dev/null\n+++ b/" + encoded + b"\n" + f"@@ -0,0 +1,{len(body)} @@\n".encode()
    )
    return header + _terminate(b"+" + line for line in body)


def _terminate(lines: Iterable[bytes]) -> bytes:
    """Join diff lines, marking a last line that has no newline the way git does."""
    out = []
    for line in lines:
        out.append(line if line.endswith(b"\n") else line + b"\n" + NO_NEWLINE)
    return b"".join(out)


def result_diff(result: FileResult, base: str | None = None) -> bytes:
    """The converted script and each generated file, as `--write` would write them."""
    parts = [file_diff(result.old.encode(result.encoding), result.new.encode(result.encoding),
                       display_path(result.path, base))]
    for artifact in result.artifacts:
        name = display_path(artifact.path, base)
        data = artifact.text.encode("utf-8")
        if os.path.isfile(artifact.path):
            with open(artifact.path, "rb") as stream:
                parts.append(file_diff(stream.read(), data, name))
        else:
            parts.append(new_file_diff(data, name, artifact.executable))
    return b"".join(parts)


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
