"""A conversion of a script whose training step lives in modules of its own project (issue 27): the
script and those modules read as one program (analysis.program), converted by the target's steps
as one file is, then split into one result per file (program_edits).

A module is edited only when the script is the one entry point of its folder that imports it (the
others would get a module that needs the launcher): otherwise the whole conversion is refused
(MIG133, naming them). A module whose own `__main__` block runs what would be edited there is not
converted with the script (DemoRunsEdits: the caller converts again without it; MIG137). Each edited module says which entry points were considered (MIG132).
Positions are the program's until here; each finding goes to the file that holds its line, and a
`line N` in its words names the file when that is another one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from migrate.analysis.program import LeftOut, Part, Program
from migrate.findings import finding
from migrate.module_demo import MODULE_LEVEL, edited_names_the_demo_runs
from migrate.program_edits import apply_to_parts
from migrate.project import importing_entry_points
from migrate.project_files import ReadModule, python_files
from migrate.records import Artifact, FileResult, Finding
from migrate.unbound import introduced_unbound_names


class DemoRunsEdits(Exception):
    """A module of the program ends with its own `__main__` block that runs what the conversion
    edits there to need the launcher (module_demo): the caller converts again without such modules,
    and adds the finding (MIG137) that says why."""

    def __init__(self, said: Finding) -> None:
        super().__init__(said.message)
        self.finding = said


@dataclass(frozen=True)
class ProgramRun:
    """What one conversion over a program produced, before it becomes results."""

    program: Program
    path: str  # the script's path as given
    code: str  # the script's text as read
    findings: tuple[Finding, ...]
    artifacts: tuple[Artifact, ...]


def refusal_result(run: ProgramRun) -> FileResult:
    """A conversion over a program that a step refused: every file left as it is, and the findings
    on the script, those about a module at the script's line that imports it, naming the module's
    file and line (a caller of the library sees why on the script it converted)."""
    program, folder = run.program, os.path.dirname(run.path)
    findings: list[Finding] = []
    for part, each in _in_files(run):
        if part is program.script:
            findings.append(each)
        else:
            findings.append(Finding(each.code, each.severity, f"in {_file(part, folder)} (line {each.line}): "
                                    f"{each.message}", part.imported_at, 1))
    findings += [_left_out(each, folder) for each in program.left_out]
    return FileResult(path=run.path, old=run.code, new=run.code, skipped=True,
                      findings=tuple(sorted(findings, key=lambda f: (f.line, f.col, f.code))))


def program_result(run: ProgramRun, plan_texts: list[tuple[Part, str]], read_module: ReadModule) -> FileResult:
    """The script's result, holding one result per module it edits; or the script left unchanged
    with the reason (a module other entry points import, a rewrite that does not compile)."""
    program, path, code = run.program, run.path, run.code
    folder = os.path.dirname(path)
    by_part: dict[str, list[Finding]] = {part.path: [] for part in program.parts}
    for part, each in _in_files(run):
        by_part[part.path].append(each)
    texts = {part.path: new for part, new in plan_texts}
    failure = _failure(program, texts, folder)
    if failure is not None:
        return FileResult(path=path, old=code, new=code, findings=(failure,), error=True)
    edited = [part for part in program.modules if texts[part.path] != part.text]
    names = python_files(read_module, folder)
    candidates = [os.path.join(folder, name) for name in names]
    modules: list[FileResult] = []
    for part in edited:
        demo_runs = edited_names_the_demo_runs(part.text, texts[part.path], part.tail) if part.tail else []
        if demo_runs:
            raise DemoRunsEdits(_demo_runs_edits(part, demo_runs, folder))
        importers = [each for each in importing_entry_points(part.path, candidates, read_module)
                     if os.path.normpath(each.path) != os.path.normpath(path)]
        if importers:
            return FileResult(path=path, old=code, new=code, findings=(_shared_module(part, importers, folder, path),),
                              skipped=True)
        note = _edited_note(part, path, folder, listed=bool(names))
        found = tuple(sorted([*by_part[part.path], note], key=lambda f: (f.line, f.col, f.code)))
        modules.append(FileResult(path=part.path, old=part.original, new=part.as_written(texts[part.path]), findings=found))
    script_new = program.script.as_written(texts[program.script.path])
    for part in program.modules:  # findings in a module the conversion does not edit
        if part not in edited and by_part[part.path]:
            found = tuple(sorted(by_part[part.path], key=lambda f: (f.line, f.col, f.code)))
            modules.append(FileResult(path=part.path, old=part.original, new=part.original, findings=found))
    kept = [*by_part[program.script.path], *(_left_out(each, folder) for each in program.left_out)]
    findings = tuple(sorted(kept, key=lambda f: (f.line, f.col, f.code)))
    return FileResult(path=path, old=code, new=script_new, findings=findings, artifacts=run.artifacts,
                      modules=tuple(modules))


def _in_files(run: ProgramRun) -> list[tuple[Part, Finding]]:
    """Each finding with the file that holds its line, its line and the lines its words name as
    that file's (the program's positions, mapped back)."""
    program, folder = run.program, os.path.dirname(run.path)
    placed: list[tuple[Part, Finding]] = []
    for each in run.findings:
        part, line = program.place(each.line) if each.line > 0 else (program.script, each.line)
        message = _lines_named(each.message, program, part, folder)
        placed.append((part, Finding(each.code, each.severity, message, line, each.col)))
    return placed


def _failure(program: Program, texts: dict[str, str], folder: str) -> Finding | None:
    """MIG901 when a file's rewrite does not compile or reads a name before it is bound."""
    for part in program.parts:
        new = texts[part.path]
        where = "" if part is program.script else f" in {_file(part, folder)}"
        try:
            compile(new, part.path, "exec")
        except SyntaxError as error:
            return finding("MIG901", f"internal error: the rewrite{where} did not compile ({error.msg}, line "
                                     f"{error.lineno}); files left untouched")
        unbound = introduced_unbound_names(part.text, new)
        if unbound:
            name, line, _col = unbound[0]
            return finding("MIG901", f"internal error: the rewrite{where} reads `{name}` (line {line}) before it is "
                                     "bound; files left untouched")
    return None


def _left_out(left: LeftOut, folder: str) -> Finding:
    """MIG135: a module of the project the program could not hold, and why."""
    names = ", ".join(f"`{name}`" for name in left.names[:4]) + (", ..." if len(left.names) > 4 else "")
    file = os.path.relpath(left.path, folder) if folder else left.path
    return finding("MIG135", f"`{file}` (imported here) was not read with this script: it binds {names} at its top "
                             "level, as the script or another module of the project does, so the conversion cannot "
                             "tell them apart; what runs in it (a model, a loop, a write) is not converted: if this "
                             "run uses it, convert it by hand or give its names their own spelling", left.line, 1)


def _edited_note(part: Part, script: str, folder: str, listed: bool) -> Finding:
    """MIG132: the module is edited with the script, and which entry points were considered."""
    others = ("no other entry point of its folder imports it" if listed
              else "the other files of its folder were not listed, so other importers were not looked for")
    if part.tail:
        others += f"; its own `__main__` block (line {part.tail_line}) runs nothing the conversion made need the launcher"
    return finding("MIG132", f"edited with {os.path.relpath(script, folder) if folder else script}, the entry "
                             f"point that imports it, as one program: {others}", 1, 1)


def _shared_module(part: Part, importers: list, folder: str, script: str) -> Finding:  # type: ignore[type-arg]  # project.Importer
    """MIG133: the module the conversion would edit is imported by other entry points too."""
    named = "; ".join(each.describe(folder) for each in importers[:4]) + (", ..." if len(importers) > 4 else "")
    return finding("MIG133", f"the conversion edits `{_file(part, folder)}` (the training step or what it changes "
                             f"lives there), which other entry points of the folder import too: {named}; edited, it "
                             "would need the launcher's process group under them as well. Left unchanged (and the "
                             "module too): give this script its own copy of the module, or convert by hand", 1, 1)


def _demo_runs_edits(part: Part, names: list[str], folder: str) -> Finding:
    """MIG137: the module's own `__main__` block runs what the conversion would edit in it."""
    named = ", ".join(name if name == MODULE_LEVEL else f"`{name}`" for name in names[:4]) + (", ..." if len(names) > 4 else "")
    return finding("MIG137", f"`{_file(part, folder)}` (imported here) was not converted with this script: its own "
                             f"`__main__` block (line {part.tail_line}) runs {named}, which the conversion would edit "
                             "to need the launcher's process group, and that block runs as one process; what the "
                             "module does for this script is left as it is: move the block to a script of its own to "
                             "have the module converted", part.imported_at, 1)


def _file(part: Part, folder: str) -> str:
    return os.path.relpath(part.path, folder) if folder else part.path


_LINES = re.compile(r"\b(lines?) (\d+)((?:(?:, | and | to |-)\d+)*)")
_NUMBER = re.compile(r"\d+")


def _lines_named(message: str, program: Program, part: Part, folder: str) -> str:
    """`line N` (and `lines N, M`, `lines N-M`) of the program as the lines of the file that holds
    them (that file named when it is not the finding's own)."""
    def named(match: re.Match[str]) -> str:
        holder, first = program.place(int(match.group(2)))
        rest = _NUMBER.sub(lambda number: str(program.place(int(number.group(0)))[1]), match.group(3))
        where = "" if holder is part else f" of {_file(holder, folder)}"
        return f"{match.group(1)} {first}{rest}{where}"

    return _LINES.sub(named, message)
