"""Runs the check rules over scripts: `check_source` (text in, violations out, nothing read or
written), `check_paths` (files and folders, chosen as the to-* commands choose them:
migrate.paths), and the ways a run prints (`render_text`, `render_json`, `render_sarif`: SARIF
2.1.0 through migrate.review.sarif, with the rules' own levels and summaries).

`fix_paths` is `--fix`: it repairs what migrate.check.fix can and writes through migrate.writing,
all or nothing (nothing at all when a file cannot be read or parsed).

A file that cannot be read or parsed is an InputError naming the user's path (`path:line:col:
syntax error: ...`), never a violation. A line that ends with `# noqa` is left out of every rule,
one with `# noqa: DC401,DC5` out of those codes (prefixes allowed), as ruff does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from migrate.records import InputError
from migrate.paths import select as select_files
from migrate.sources import read

if TYPE_CHECKING:  # the rules and the parsed script need libcst: imported when a check runs
    from migrate.check.facts import Hit, Script
    from migrate.check.rules import Rule

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z0-9, ]+))?", re.IGNORECASE)


@dataclass(frozen=True)
class Violation:
    """One finding of `migrate check`."""

    path: str
    line: int
    col: int
    code: str
    severity: str
    message: str

    def render(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"


@dataclass
class Outcome:
    """What a run over paths found: its violations, the files it could not check, how many it did."""

    violations: list[Violation] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    checked: int = 0


def check_source(code: str, path: str = "train.py", rules: Iterable[Rule] = ()) -> list[Violation]:
    """The violations of one script's text, sorted by place (every rule when `rules` is empty).
    Raises InputError for text that does not parse."""
    from migrate.check.facts import parse_script
    from migrate.check.rules import RULES

    script = parse_script(code, path)
    found = [_violation(script, rule, hit) for rule in (tuple(rules) or RULES) for hit in rule.find(script)]
    kept = {v for v in found if not _silenced(code, v)}
    return sorted(kept, key=lambda v: (v.path != path, v.path, v.line, v.col, v.code))


def _violation(script: Script, rule: Rule, hit: Hit) -> Violation:
    if hit.where is not None:
        path, line, col = hit.where
    else:
        path, (line, col) = script.path, script.position(hit.node) if hit.node is not None else (0, 0)
    return Violation(path, line, col, rule.code, rule.severity, hit.message)


def _silenced(code: str, violation: Violation) -> bool:
    """`# noqa` (every code) or `# noqa: DC401,DC5` on the violation's line."""
    lines = code.splitlines()
    if not 0 < violation.line <= len(lines):
        return False
    match = NOQA.search(lines[violation.line - 1])
    if match is None:
        return False
    codes = [c.strip().upper() for c in (match.group("codes") or "").split(",") if c.strip()]
    return not codes or violation.code.startswith(tuple(codes))


def check_file(path: str, rules: Iterable[Rule] = ()) -> list[Violation] | InputError:
    """One file's violations, or the InputError that says why it could not be checked."""
    try:
        return check_source(read(path).text, path, rules)
    except InputError as error:
        return error
    except RecursionError:
        return InputError(path, 0, 0, "nested too deeply to analyse; not checked", code="MIG901")


def check_paths(paths: Iterable[str], rules: Iterable[Rule] = (), exclude: Iterable[str] = ()) -> Outcome:
    """Every file named or found in a folder named (migrate.paths.select), checked."""
    chosen = tuple(rules)
    selection = select_files(paths, exclude)
    outcome = Outcome(errors=list(selection.errors))
    for found in selection.files:
        result = check_file(found.path, chosen)
        if isinstance(result, InputError):
            outcome.errors.append(result)
        else:
            outcome.checked += 1
            outcome.violations.extend(result)
    return outcome


def fix_paths(paths: Iterable[str], codes: tuple[str, ...], exclude: Iterable[str] = ()) -> tuple[list[str], list[InputError]]:
    """`--fix`: every chosen file's fixable findings (migrate.check.fix) repaired and written as
    `--write` writes (migrate.writing: all files or none, each in its own encoding, refused when a
    file changed since it was read). Returns a line per repair (`path:line:col: fixed CODE what`)
    and the files that could not be read; raises InputError, naming the user's file, when writing fails."""
    from migrate import writing
    from migrate.check.fix import fix_source

    selection = select_files(paths, exclude)
    errors, lines, outputs = list(selection.errors), [], []
    for found in selection.files:
        try:
            source = read(found.path)
            new, done = fix_source(source.text, found.path, codes)
        except InputError as error:
            errors.append(error)
            continue
        if done:
            outputs.append(writing.Output(found.path, new.encode(source.encoding), found.path, expected=source.digest))
            lines += [f"{found.path}:{line}:{col}: fixed {code} {what}\n" for line, col, code, what in done]
    if outputs and not errors:
        writing.write(outputs)
    return (lines if not errors else []), errors


def render_text(outcome: Outcome) -> tuple[str, str]:
    """(stdout, stderr): a line per violation; the errors and a closing count line."""
    out = "".join(v.render() + "\n" for v in outcome.violations)
    return out, _errors(outcome) + summary(outcome) + "\n"


def render_json(outcome: Outcome) -> tuple[str, str]:
    """(stdout, stderr): a JSON list of {path, line, col, code, severity, message}; errors and the count on stderr."""
    out = json.dumps([asdict(v) for v in outcome.violations], indent=2) + "\n"
    return out, _errors(outcome) + summary(outcome) + "\n"


def render_sarif(outcome: Outcome) -> tuple[str, str]:
    """(stdout, stderr): the violations as one SARIF 2.1.0 log, each rule with its code, level and
    summary (migrate.review.sarif); errors and the count on stderr."""
    from migrate.check.rules import RULES
    from migrate.review.sarif import Rule, installed_version, sarif_log

    rules = {r.code: Rule(r.severity, r.summary, f"{r.code}: {r.summary}. `migrate check --list-rules` lists every rule; "
                          "README.md's `migrate check` section says what each finds.") for r in RULES}
    log = sarif_log([asdict(v) for v in outcome.violations], installed_version(), rules)
    return json.dumps(log, indent=2) + "\n", _errors(outcome) + summary(outcome) + "\n"


def _errors(outcome: Outcome) -> str:
    return "".join(f"{error}\n" for error in outcome.errors)


def summary(outcome: Outcome) -> str:
    """`Found 3 findings in 2 of 5 files.` / `All checks passed (5 files).`, with the unreadable files."""
    files = {v.path for v in outcome.violations}
    checked = f"{outcome.checked} file{'' if outcome.checked == 1 else 's'}"
    errors = f"; {len(outcome.errors)} could not be checked" if outcome.errors else ""
    if not outcome.violations:
        return f"All checks passed ({checked}{errors})."
    count = len(outcome.violations)
    return f"Found {count} finding{'' if count == 1 else 's'} in {len(files)} of {checked}{errors}."
