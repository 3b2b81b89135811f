"""A conversion as the JSON body of a GitHub pull-request review
(`POST /repos/{owner}/{repo}/pulls/{number}/reviews`): `event` COMMENT, one comment per changed
range of each script (hunks.py) holding a ```suggestion block and one sentence of why (why.py,
and the findings on those lines), so a reviewer accepts or rejects each change on the PR page.

The pull request holds the original script; a comment covers the original lines its hunk
replaces (`start_line`..`line`, side RIGHT). A pure insertion has no line of its own: it is
attached to the line before it (the suggestion repeats that line, then the inserted ones), or at
the top of the file to the first line (the inserted lines, then that line). Applying every
suggestion gives exactly what `--write` writes. What no suggestion can carry goes in the review's
`body`: the files to create (launcher, config), a change to a file's last newline, the findings on
lines no hunk touches, and the run's errors and notes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from migrate.records import FileResult, Finding
from migrate.report import display_path
from migrate.review.hunks import Hunk, hunks, text_lines
from migrate.review.why import reason


def review(results: Iterable[FileResult], framework: str, messages: Iterable[str] = ()) -> dict[str, object]:
    """The review body for every converted file; `messages`: the run's errors and notes."""
    comments: list[dict[str, object]] = []
    notes: list[str] = []
    for result in results:
        if result.error:
            continue
        file_comments, file_notes = _file_review(result, framework)
        comments.extend(file_comments)
        notes.extend(file_notes)
    notes.extend(f"- {message}" for message in messages)
    head = (f"torch-migrate: the conversion to {framework}, as {_count(len(comments), 'suggested change')}. "
            "Accepting every suggestion gives what `--write` writes")
    head += "; also:" if notes else "."
    return {"body": "\n".join([head, *notes]), "event": "COMMENT", "comments": comments}


def _file_review(result: FileResult, framework: str) -> tuple[list[dict[str, object]], list[str]]:
    """One file's comments, and the lines of the review body it adds."""
    name = display_path(result.path)
    old, new = text_lines(result.old), text_lines(result.new)
    comments: list[dict[str, object]] = []
    notes: list[str] = []
    left = list(result.findings)
    for hunk in hunks(old, new):
        placed = _place(hunk, old, new, _ending_changes(result, hunk, len(old)))
        if placed is None:
            notes.append(f"- `{name}`, a change no suggestion can carry (the end of the file, or an empty file):\n"
                         + _fenced("diff", [f"-{line}" for line in old[hunk.old_start:hunk.old_stop]]
                                   + [f"+{line}" for line in new[hunk.new_start:hunk.new_stop]]))
            continue
        start, line, lines = placed
        mine = [f for f in left if start <= f.line <= line]
        left = [f for f in left if f not in mine]
        comments.append(_comment(name, start, line, lines, reason(new[hunk.new_start:hunk.new_stop], framework), mine))
    if result.old.endswith("\n") != result.new.endswith("\n") and not any(h.old_stop >= len(old) for h in hunks(old, new)):
        gains = "gains" if result.new.endswith("\n") else "loses"
        notes.append(f"- `{name}` {gains} the newline at its end (no suggestion can carry it)")
    notes.extend(f"- `{name}:{f.line}:{f.col}`: {_finding_text(f)}" for f in left)
    for artifact in result.artifacts:
        notes.append(f"- create `{display_path(artifact.path)}`{' (executable)' if artifact.executable else ''}:\n"
                     + _fenced("", text_lines(artifact.text)))
    return comments, notes


def _ending_changes(result: FileResult, hunk: Hunk, size: int) -> bool:
    """Whether the hunk touches the last line while the file gains or loses its final newline."""
    if result.old.endswith("\n") == result.new.endswith("\n"):
        return False
    return hunk.old_stop >= size


def _place(hunk: Hunk, old: list[str], new: list[str], ending: bool) -> tuple[int, int, list[str]] | None:
    """(start_line, line, suggested lines), 1-based lines of the original; None when no suggestion fits."""
    inserted = new[hunk.new_start:hunk.new_stop]
    if ending or not old:
        return None
    if not hunk.insertion:
        return hunk.old_start + 1, hunk.old_stop, inserted
    if hunk.old_start > 0:  # repeat the line before, then the inserted lines
        return hunk.old_start, hunk.old_start, [old[hunk.old_start - 1], *inserted]
    return 1, 1, [*inserted, old[0]]  # at the very top: the inserted lines, then the first line


def _comment(path: str, start: int, line: int, lines: list[str], why: str, findings: list[Finding]) -> dict[str, object]:
    """A review comment over original lines start..line replacing them with `lines`."""
    body = [_fenced("suggestion", lines), why]
    body.extend(f"- {_finding_text(f)} (line {f.line})" for f in findings)
    comment: dict[str, object] = {"path": path, "line": line, "side": "RIGHT", "body": "\n".join(body)}
    if start < line:
        comment.update(start_line=start, start_side="RIGHT")
    return comment


def _finding_text(finding: Finding) -> str:
    return f"{finding.code} ({finding.severity.value}): {finding.message}"


def _fenced(info: str, lines: list[str]) -> str:
    """A code block whose fence is longer than any run of backticks inside it."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + info, *lines, fence])


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
