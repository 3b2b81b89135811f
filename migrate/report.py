"""Turns FileResults into what people read: a unified diff that `git apply` accepts (a/ b/
prefixes, created files as /dev/null diffs with their mode; coloured for a terminal), and
findings as text or JSON (the markdown report is migrate.review.description).

The diff's lines are matched the way `git diff --patience` does, in time about linear in the
file's length: lines found once on each side anchor it (the longest run of them in the same
order), the stretches between anchors are matched again the same way, and difflib only matches
stretches without such lines. difflib alone re-scans the rest of the file for each matching
block, so a file with thousands of small edits took time quadratic in its length.
"""

from __future__ import annotations

import bisect
import difflib
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence

from migrate.records import FileResult, Finding

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
    lines = unified_diff(lines_of(old), lines_of(new), b"a/" + encoded, b"b/" + encoded)
    return b"diff --git a/" + encoded + b" b/" + encoded + b"\n" + _terminate(lines)


def unified_diff(a: list[bytes], b: list[bytes], old_name: bytes, new_name: bytes, context: int = 3) -> list[bytes]:
    """The lines of a unified diff of `a` into `b`, as difflib.unified_diff writes them, over
    the lines matching_blocks pairs."""
    groups = list(_AnchoredMatcher(a, b).get_grouped_opcodes(context))
    if not groups:
        return []
    out = [b"--- " + old_name + b"\n", b"+++ " + new_name + b"\n"]
    for group in groups:
        first, last = group[0], group[-1]
        out.append(b"@@ -%s +%s @@\n" % (_hunk_range(first[1], last[2]), _hunk_range(first[3], last[4])))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(b" " + line for line in a[i1:i2])
                continue
            out.extend(b"-" + line for line in a[i1:i2])
            out.extend(b"+" + line for line in b[j1:j2])
    return out


def _hunk_range(start: int, stop: int) -> bytes:
    """A hunk header's `start,length` (1-based; an empty range names the line before it)."""
    length = stop - start
    if length == 1:
        return b"%d" % (start + 1)
    return b"%d,%d" % (start + 1 if length else start, length)


class _AnchoredMatcher(difflib.SequenceMatcher[bytes]):
    """difflib's opcodes and hunks, over the matching blocks `matching_blocks` finds."""

    # set by SequenceMatcher.set_seqs; typeshed does not declare them
    a: list[bytes]
    b: list[bytes]
    matching_blocks: list[difflib.Match] | None

    def __init__(self, a: list[bytes], b: list[bytes]) -> None:
        super().__init__(None, a, b, autojunk=False)

    def get_matching_blocks(self) -> list[difflib.Match]:
        if self.matching_blocks is None:
            self.matching_blocks = [difflib.Match(*block) for block in matching_blocks(self.a, self.b)]
        return self.matching_blocks


def matching_blocks(a: Sequence[bytes], b: Sequence[bytes]) -> list[tuple[int, int, int]]:
    """(i, j, n): a[i:i+n] == b[j:j+n], increasing in i and j, ending with (len(a), len(b), 0) as
    difflib's do. Patience matching (see the module docstring), one stretch at a time."""
    pairs: list[tuple[int, int]] = []
    stretches = [(0, len(a), 0, len(b))]
    while stretches:
        alo, ahi, blo, bhi = stretches.pop()
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            pairs.append((alo, blo))
            alo, blo = alo + 1, blo + 1
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi, bhi = ahi - 1, bhi - 1
            pairs.append((ahi, bhi))
        if alo == ahi or blo == bhi:
            continue
        anchors = _anchors(a, alo, ahi, b, blo, bhi)
        if not anchors:
            matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi])
            pairs.extend((alo + i + k, blo + j + k) for i, j, n in matcher.get_matching_blocks() for k in range(n))
            continue
        for i, j in anchors:
            stretches.append((alo, i, blo, j))
            pairs.append((i, j))
            alo, blo = i + 1, j + 1
        stretches.append((alo, ahi, blo, bhi))
    return _blocks(sorted(pairs), len(a), len(b))


def _anchors(a: Sequence[bytes], alo: int, ahi: int, b: Sequence[bytes], blo: int, bhi: int) -> list[tuple[int, int]]:
    """Lines found exactly once in a[alo:ahi] and once in b[blo:bhi]: the longest run of them in
    the same order on both sides, as (i, j) pairs."""
    in_a, in_b = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    where_b = {line: j for j, line in enumerate(b[blo:bhi], blo) if in_b[line] == 1}
    pairs = [(i, where_b[line]) for i, line in enumerate(a[alo:ahi], alo) if in_a[line] == 1 and line in where_b]
    return _longest_increasing(pairs)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of `pairs` (increasing in i) that is increasing in j too."""
    tails: list[int] = []  # tails[k]: the smallest j ending an increasing run of length k + 1
    ends: list[int] = []  # ends[k]: the index in pairs of that run's last pair
    before: list[int] = []  # before[p]: the index of the pair before pairs[p] in its run, or -1
    for index, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tails, j)
        before.append(ends[k - 1] if k else -1)
        if k == len(tails):
            tails.append(j)
            ends.append(index)
        else:
            tails[k], ends[k] = j, index
    run: list[tuple[int, int]] = []
    index = ends[-1] if ends else -1
    while index >= 0:
        run.append(pairs[index])
        index = before[index]
    return run[::-1]


def _blocks(pairs: list[tuple[int, int]], size_a: int, size_b: int) -> list[tuple[int, int, int]]:
    """Matched line pairs, sorted, as runs (i, j, n), with difflib's closing (len(a), len(b), 0)."""
    blocks: list[list[int]] = []
    for i, j in pairs:
        if blocks and blocks[-1][0] + blocks[-1][2] == i and blocks[-1][1] + blocks[-1][2] == j:
            blocks[-1][2] += 1
        else:
            blocks.append([i, j, 1])
    return [(i, j, n) for i, j, n in blocks] + [(size_a, size_b, 0)]


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


# ANSI colours of a diff on a terminal, as git colours one: file headers bold, hunk headers cyan
COLOURS = ((b"diff --git ", b"\x1b[1m"), (b"new file mode", b"\x1b[1m"), (b"--- ", b"\x1b[1m"), (b"+++ ", b"\x1b[1m"),
           (b"@@", b"\x1b[36m"), (b"+", b"\x1b[32m"), (b"-", b"\x1b[31m"))
RESET = b"\x1b[m"


def coloured(diff: bytes) -> bytes:
    """A diff with ANSI colours, for a terminal only (a coloured diff no longer applies)."""
    out = []
    for line in lines_of(diff):
        body = line.removesuffix(b"\n")
        colour = next((c for prefix, c in COLOURS if body.startswith(prefix)), None)
        out.append(colour + body + RESET + line[len(body):] if colour else line)
    return b"".join(out)


def findings_text(result: FileResult) -> list[str]:
    return [f.render(display_path(result.path)) for f in result.findings]


def findings_json(results: Iterable[FileResult]) -> str:
    return json.dumps(
        [{"path": display_path(r.path), **_finding_dict(f)} for r in results for f in r.findings], indent=2
    )


def _finding_dict(finding: Finding) -> dict[str, object]:
    return {"line": finding.line, "col": finding.col, "code": finding.code,
            "severity": finding.severity.value, "message": finding.message}
