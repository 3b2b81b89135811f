"""The library API: convert source text, or files on disk, to a target.

`migrate_source` is pure (text in, FileResult out; the modules of the script's folder only through
the reader it is handed, migrate.project_files, which for the disk also lists the folder's Python
files for MIG119), except that before parsing it refuses a file
whose syntax tree would not fit in the memory left (migrate.sources.check_memory), and it lets
CPython's compiler check the text first, so what CPython refuses is the input's error, in its
words. `migrate_paths` adds choosing the files (migrate.paths), reading them (migrate.sources:
encoding cookies, regular files only) and turning any failure in one file into an error for that
file, and settles the files of one run together (`settle`, which the CLI calls too). Writing is
migrate.writing. libcst is imported only here and below, on first use, so the CLI starts fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

from migrate.findings import finding
from migrate.records import FileResult, InputError
from migrate.options import OptionsError
from migrate.options import check as check_options
from migrate.paths import select
from migrate.project_files import ReadModule, python_files, read_from_disk, read_nothing
from migrate.sources import check_memory, read
from migrate.target_options import Options

if TYPE_CHECKING:
    import libcst as cst

    from migrate.analysis.program import Program
    from migrate.project import Graph, Importer
    from migrate.records import Artifact
    from migrate.rewrite import EditPlan
    from migrate.steps.base import Context

    from migrate.analysis.index import ScriptIndex
    from migrate.analysis.sites import TrainingSites
    from migrate.records import Finding
    from migrate.targets.base import Target

T = TypeVar("T")

# A file without these words cannot be a training loop: skip it before parsing.
PREFILTER_WORDS = ("backward",)
# Findings that describe a change to the file (setup placed, a wrapper replaced): dropped when a
# later step refuses the file, which is then left exactly as it was.
ONLY_WHEN_CONVERTED = frozenset({"MIG003", "MIG107", "MIG108", "MIG301", "MIG305"})


def migrate_source(code: str, target: str, options: Options | None = None, path: str = "train.py",
                   read_module: ReadModule = read_nothing) -> FileResult:
    """Convert one script's text. Raises InputError on a syntax error; never writes anything.
    Modules of the script's folder (`path`'s) are seen only through `read_module` (the default
    reads none; migrate_file hands over migrate.project_files.read_from_disk). A module of the
    project whose own `__main__` demo runs what the conversion would edit there makes it convert
    again without such modules, saying so (MIG137)."""
    from migrate.project_conversion import DemoRunsEdits

    try:
        return _migrate_source(code, target, options, path, read_module, demos=True)
    except DemoRunsEdits as demo:
        result = _migrate_source(code, target, options, path, read_module, demos=False)
        findings = sorted([*result.findings, demo.finding], key=lambda f: (f.line, f.col, f.code))
        return dataclasses.replace(result, findings=tuple(findings))


def _migrate_source(code: str, target: str, options: Options | None, path: str, read_module: ReadModule,
                    demos: bool) -> FileResult:
    """migrate_source's conversion; `demos`: whether a module with its own `__main__` demo may be
    converted with the script (analysis.program.join)."""
    import libcst as cst

    from migrate.analysis import analyze, frameworks_called
    from migrate.rewrite import EditPlan
    from migrate.steps.base import Context
    from migrate.targets import framework_markers
    from migrate.unbound import introduced_unbound_names
    from migrate.unused_imports import drop_imports_made_unused

    from migrate.analysis.program import Program, join, project_walk

    spec = target_named(target)
    options = options if options is not None else spec.options_class()
    check_options(spec, options)  # raises OptionsError, worded as the command line words it
    program: Program | None = None
    walk = project_walk(path, code, read_module)  # walked once, for join and MIG002's message alike
    if not any(word in code for word in PREFILTER_WORDS):
        _check_syntax(code, path)
        program = join(path, code, read_module, walk=walk, demos=demos)
        imported = {m: m for m in re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", code, re.MULTILINE)}
        if program is None:
            return _skipped(path, code, "MIG002", _no_backward_message(imported, code, path, target, read_module, walk))
    check_memory(path, code)  # libcst aborts the process when it runs out of memory
    _check_syntax(code, path)
    try:
        module = cst.parse_module(code) if program is None else program.module
    except cst.ParserSyntaxError as error:
        raise InputError(path, error.raw_line, error.raw_column + 1, f"syntax error: {error.message}") from None
    sites = analyze(module) if program is None else analyze(module, program.local_modules(), len(program.script.module.body))
    if program is None:  # the training step, or what it writes, may live in a module of the project
        program = join(path, code, read_module, step_elsewhere=not sites.backward_calls, walk=walk, demos=demos)
        if program is not None:
            imported = sites.index.imports
            module, sites = program.module, analyze(program.module, program.local_modules(), len(program.script.module.body))
    if not sites.backward_calls:
        imports = sites.index.imports if program is None else imported
        return _skipped(path, code, "MIG002", _no_backward_message(imports, code, path, target, read_module, walk))
    source = code if program is None else program.code
    frameworks = frameworks_called(sites.index, framework_markers())
    swapped = spec.swapped(frameworks)
    left_alone = None if swapped else spec.already(frameworks)
    if left_alone is not None:
        return _skipped(path, code, "MIG001", left_alone)
    conversion = spec.swap() if swapped and spec.swap is not None else spec.conversion()
    if program is not None and (sites.entry is None or sites.entry.library):  # the program trains nowhere it runs
        return _skipped(path, code, "MIG002", _no_backward_message(imported, code, path, target, read_module, walk))
    if conversion.runtime is not None:  # setup must run where training starts, before what it builds
        if sites.entry is not None and sites.entry.library:
            library = _library_finding(sites, code, path, target, read_module)
            return FileResult(path=path, old=code, new=code, findings=(library,), skipped=True)
        built_early = _import_time_finding(sites, code)
        if built_early is not None:
            return FileResult(path=path, old=code, new=code, findings=(built_early,), skipped=True)
    plan = EditPlan(module=module)
    ctx = Context(sites=sites, plan=plan, options=options, runtime=conversion.runtime, wrapper=conversion.wrapper,
                  source=source, script=os.path.basename(path), path=path, read_module=read_module, program=program)
    for step in conversion.steps:
        step(ctx)
        if ctx.refused:
            kept = tuple(f for f in ctx.findings if f.code not in ONLY_WHEN_CONVERTED)
            if program is not None:
                return _program_refusal(program, path, code, kept)
            return FileResult(path=path, old=code, new=code, findings=kept, skipped=True)
    if program is not None:
        return _program_converted(program, plan, sites, path, code, ctx, tuple(conversion.artifacts(path, ctx)))
    new_code = drop_imports_made_unused(code, plan.apply(sites.index.import_stmts, _imports_stdlib).code)
    findings = tuple(sorted(ctx.findings, key=lambda f: (f.line, f.col, f.code)))
    try:
        compile(new_code, path, "exec")
    except SyntaxError as error:
        message = f"internal error: the rewrite did not compile ({error.msg}, line {error.lineno}); file left untouched"
        return FileResult(path=path, old=code, new=code, findings=(finding("MIG901", message),), error=True)
    unbound = introduced_unbound_names(code, new_code)
    if unbound:
        name, line, _col = unbound[0]
        message = f"internal error: the rewrite reads `{name}` (line {line}) before it is bound; file left untouched"
        return FileResult(path=path, old=code, new=code, findings=(finding("MIG901", message),), error=True)
    return FileResult(path=path, old=code, new=new_code, findings=findings, artifacts=tuple(conversion.artifacts(path, ctx)))


def _program_converted(program: Program, plan: EditPlan, sites: TrainingSites, path: str, code: str, ctx: Context,
                       artifacts: tuple[Artifact, ...]) -> FileResult:
    """The result of a conversion over the script and modules of its project (migrate.project_conversion)."""
    from migrate.program_edits import apply_to_parts
    from migrate.project_conversion import ProgramRun, program_result

    texts = apply_to_parts(plan, program, sites.index.import_stmts, _imports_stdlib, _module_guards(ctx))
    run = ProgramRun(program, path, code, tuple(ctx.findings), artifacts)
    return program_result(run, [(each.part, each.new) for each in texts], ctx.read_module)


def _module_guards(ctx: Context) -> dict[str, str]:
    """The script's rank-0 test mapped to the one a module of the project spells instead
    (Context.rank_zero_test: the launcher's RANK where the launcher sets it); empty where they agree."""
    if not ctx.modules_test_launcher_rank() or not ctx.plan.guarded:
        return {}
    return {ctx.rank_zero_test(): ctx.rank_zero_test(in_module=True)}


def _program_refusal(program: Program, path: str, code: str, findings: tuple[Finding, ...]) -> FileResult:
    """A refused conversion over a program: every file left as it is, the findings where they point."""
    from migrate.project_conversion import ProgramRun, refusal_result

    return refusal_result(ProgramRun(program, path, code, findings, ()))


def target_named(name: str) -> Target:
    """The registry's target called `name`; OptionsError naming the ones this version converts to."""
    from migrate.targets import targets

    spec = targets().get(name)
    if spec is None or not spec.available:
        known = ", ".join(n for n, t in targets().items() if t.available)
        raise OptionsError(f"target: {name!r} is not a target this version converts to (choose {known})")
    return spec


def _library_finding(sites: TrainingSites, code: str, path: str, target: str, read_module: ReadModule) -> Finding:
    """MIG119 for a module that only defines functions and classes: which ones train, and where; and
    the entry points of its folder that import it (migrate.project), each with the command to run.
    The folder is listed only when modules are read at all and it holds this file (not for a
    conversion of text, nor for a copy elsewhere): otherwise the advice says nothing of importers."""
    from migrate.analysis.positions import Positions

    trainers: list[str] = []
    for call in sites.backward_calls:
        name = call.place.scope.name
        if name not in trainers:
            trainers.append(name)
    first = sites.index.functions[trainers[0]].node if trainers and trainers[0] in sites.index.functions else None
    line, col = Positions(sites.index.module, code).of(first) if first is not None else (1, 1)
    named = ", ".join(f"`{name}()`" for name in trainers[:3]) + (", ..." if len(trainers) > 3 else "")
    advice = (f"to train on several processes, give this file an entry point (an `if __name__ == \"__main__\":` block "
              f"that calls {_first(trainers)}), convert it again and launch this file itself")
    folder = os.path.dirname(path)
    names = python_files(read_module, folder)
    if os.path.basename(path) in names:
        importers, runs = _importer_commands(path, target, read_module)
        more = f"; and {len(importers) - 5} more" if len(importers) > 5 else ""
        if len(importers) == 1:
            advice = f"it is imported by {runs[0]}, the script its training runs from"
        elif importers:
            advice = f"it is imported by {len(importers)} entry points of its folder: " + "; ".join(runs) + more
        else:
            advice = "no entry point of its folder imports it; " + advice
    message = (
        f"no entry point: this file only defines functions and classes ({named} runs backward) and has no "
        '`if __name__ == "__main__":` block or top-level code that trains, so it is a module other code imports; '
        f"setting up (and tearing down) a process group on import would break the caller. Left unchanged: {advice}"
    )
    return finding("MIG119", message, line, col)


def _import_time_finding(sites: TrainingSites, code: str) -> Finding | None:
    """MIG124 when setup goes into a function (`run()`) but the model or the training loader is
    built by module-level code: that code runs at import, before `init_process_group` in the
    function, so neither the wrapper nor the DistributedSampler could be built there. (A module-level
    `device = torch.device("cuda")` is fine: it names the current device, which setup sets.)"""
    from migrate.analysis import _model_statement
    from migrate.analysis.positions import Positions

    entry = sites.entry
    if entry is None or entry.library or entry.scope.is_module:
        return None
    index = sites.index
    seen: list[tuple[cst.BaseStatement | None, str]] = [(_model_statement(site), f"the model `{site.spelling}`") for site in sites.models]
    seen += [(site.call.place.stmt, f"the training DataLoader `{site.spelling}`" if site.spelling else "the training DataLoader")
             for site in sites.loaders]
    early = [(stmt, what) for stmt, what in seen if stmt is not None and _at_module_level(index, stmt)]
    early_statements: list[tuple[cst.BaseStatement, str]] = early
    if not early:
        return None
    positions = Positions(index.module, code)
    stmt, what = min(early_statements, key=lambda pair: positions.of(pair[0]))
    line, col = positions.of(stmt)
    function = entry.scope.name
    message = (
        f"{what} is built at import time (line {line}) but training starts in `{function}()`: process-group "
        f"setup belongs in `{function}()`, and module-level code runs before it, so neither the "
        f"distributed wrapper nor the DistributedSampler can be built there. Left unchanged: build it inside "
        f"`{function}()` (or pass it in), then convert again, or convert by hand"
    )
    return finding("MIG124", message, line, col)


def _at_module_level(index: ScriptIndex, stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` runs as module-level code: not inside a def or a class."""
    import libcst as cst

    return all(not isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in index.enclosing_statements(stmt))


# Packages that hold no training loop of the user's: not worth naming in MIG002.
KNOWN_PACKAGES = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "numpy", "scipy", "pandas", "sklearn", "matplotlib",
    "PIL", "cv2", "tqdm", "yaml", "wandb", "tensorboard", "tensorboardX", "transformers", "datasets", "gym",
    "gymnasium", "einops", "timm", "deepspeed", "accelerate", "lightning", "pytorch_lightning",
})


def _no_backward_message(imports: dict[str, str], code: str, path: str, target: str, read_module: ReadModule,
                         walk: Callable[[], Graph]) -> str:
    """MIG002, naming the modules of the script's project (`walk`: the graph join read, two imports deep) where
    the backward runs, read through `read_module` (an import that resolves to no file of the folder
    is named as a place it may be), the call of the script that runs it (analysis.sibling_training),
    and whether that module has an entry point of its own: one that has none is never named as the
    file to convert, since converting it alone is refused (MIG119)."""
    import sys

    from migrate.analysis.sibling_training import NOT_FOLLOWED, step_call, trainers
    from migrate.project import runs_when_started

    roots = sorted({q.split(".")[0] for q in imports.values()} - KNOWN_PACKAGES - set(sys.stdlib_module_names) - {""})
    if not roots:
        return "not a training script (no backward pass); left unchanged"
    folder = os.path.dirname(path)
    modules: dict[str, str] = {}  # path -> dotted name, in the order they are imported
    for link in walk().links:
        modules.setdefault(link.module, link.dotted)
    found = trainers([(dotted, module) for module, dotted in modules.items()], read_module)
    called = step_call(code, found) if found else None
    if found and not runs_when_started(code):
        where = called.describe(folder) if called is not None else f"the backward runs in {found[0].named()}"
        return (f"no backward pass in this file, which runs nothing when started (no `if __name__ == \"__main__\":` "
                f"block or top-level code): {where}; left unchanged: {_importers_advice(path, target, read_module)}")
    if called is not None:
        file = called.trainer.file(folder)
        if called.trainer.library:
            return (f"no backward pass in this file: {called.describe(folder)}; {NOT_FOLLOWED}, and `{file}` has no "
                    f"entry point of its own, so converting it alone is refused too; left unchanged (to convert now, "
                    f"move the training step into this file)")
        return (f"no backward pass in this file: {called.describe(folder)}; {NOT_FOLLOWED}; left unchanged (move the "
                f"training step into this file, or convert `{file}`, which has an entry point of its own, and launch it)")
    if found:
        own = [f"`{t.file(folder)}`" for t in found if not t.library]
        advice = (f"; {', '.join(own)} {'has' if len(own) == 1 else 'have'} an entry point of its own: convert that "
                  f"file and launch it" if own else ", and none of them has an entry point of its own: move the "
                  "training step into this file to convert it")
        where = "a module of its project it imports" if len(found) == 1 else "modules of its project it imports"
        return (f"no backward pass in this file; left unchanged: the backward runs in {where}, "
                f"{', '.join(t.named() for t in found[:4])}, and {NOT_FOLLOWED}{advice}")
    resolved = {dotted.split(".")[0] for dotted in modules.values()}
    unread = [f"`{root}`" for root in roots if root not in resolved]
    if not unread:
        return "not a training script (no backward pass, here or in the modules of its folder it imports); left unchanged"
    return (f"no backward pass in this file; left unchanged (if the training loop runs in a module it imports, "
            f"such as {', '.join(unread[:4])}, convert that file and launch it: a file that only defines functions is "
            f"left unchanged too, so first give it an `if __name__ == \"__main__\":` block that calls its training "
            f"function)")


def _importers_advice(path: str, target: str, read_module: ReadModule) -> str:
    """The entry points of the file's folder that import it, each with the command that converts it."""
    importers, runs = _importer_commands(path, target, read_module)
    if not importers:
        return "convert the entry point that imports it (no entry point of its folder imports it)"
    return "it is imported by " + "; ".join(runs)


def _importer_commands(path: str, target: str, read_module: ReadModule) -> tuple[list[Importer], list[str]]:
    """The entry points of the file's folder that import it (migrate.project), and for the first
    five, `train.py (line 3: ...): run `migrate to-<target> train.py``."""
    import shlex

    from migrate.project import importing_entry_points

    folder = os.path.dirname(path)
    names = python_files(read_module, folder)
    importers = importing_entry_points(path, [os.path.join(folder, name) for name in names], read_module)
    runs = [f"{each.describe(folder)}: run `migrate to-{target} {shlex.quote(each.path)}`" for each in importers[:5]]
    return importers, runs


def _first(trainers: list[str]) -> str:
    """`train()`: the function that runs backward, for MIG119's advice."""
    return f"`{trainers[0]}()`" if trainers else "its training function"


def _check_syntax(code: str, path: str) -> None:
    """CPython's own compiler first, so its messages and positions are the ones users know: what
    its parser refuses, and what only its compiler does (`return` outside a function, `nonlocal`
    at module level, `break` outside a loop, two parameters of one name, two starred targets),
    which libcst parses without a word. Its warnings (`is` with a literal) are not ours to print."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(code, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise InputError(path, error.lineno or 0, error.offset or 0, f"syntax error: {error.msg}") from None


def _imports_stdlib(stmt: object) -> bool:
    """Whether an import line brings in a standard-library module (`import os`, `from typing import ...`)."""
    import sys

    import libcst as cst

    assert isinstance(stmt, cst.SimpleStatementLine)
    small = stmt.body[0]
    name: cst.BaseExpression
    if isinstance(small, cst.Import):
        name = small.names[0].name
    elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        name = small.module
    else:
        return False
    while isinstance(name, cst.Attribute):
        name = name.value
    return isinstance(name, cst.Name) and name.value in sys.stdlib_module_names


def _skipped(path: str, code: str, finding_code: str, message: str) -> FileResult:
    return FileResult(path=path, old=code, new=code, findings=(finding(finding_code, message, 1, 1),), skipped=True)


def migrate_paths(paths: Iterable[str], target: str, options: Options | None = None,
                  exclude: Iterable[str] = ()) -> Iterator[FileResult | InputError]:
    """Convert each file (folders are searched, see migrate.paths). Yields InputError for bad input
    and for an internal error in one file, then goes on with the next: never raises for a file.
    The files are settled together as the command line settles them (see `settle`: two DeepSpeed
    scripts of one folder each get their own config; the modules of a script's project its
    conversion edits listed beside it), so every file is converted before the first result is
    yielded."""
    selection = select(paths, exclude)
    yield from selection.errors
    outcomes = [migrate_file(found.path, target, options) for found in selection.files]
    results, errors, _ = settle([o for o in outcomes if isinstance(o, FileResult)], target, options)
    yield from [o for o in outcomes if isinstance(o, InputError)] + errors
    yield from results


Note = tuple[str, str]  # (path, message): something a run over several files says about them


def settle(results: list[FileResult], target: str,
           options: Options | None = None) -> tuple[list[FileResult], list[InputError], list[Note]]:
    """What the target settles over the files of one run (DeepSpeed: scripts of one folder that
    would share ds_config.json are converted again, each with its own): the results in, re-made
    where needed, the files that failed on the second conversion, and notes for the run. One
    home for the CLI and `migrate_paths`, so both write the same files."""
    from migrate.targets import targets

    spec = targets()[target]
    errors: list[InputError] = []
    notes: list[Note] = []
    if spec.settle is not None:
        given = options if options is not None else spec.options_class()
        results, errors, notes = spec.settle(results, given, migrate_file)
    results, clashes = with_modules(results)
    return results, errors + clashes, notes


def with_modules(results: list[FileResult]) -> tuple[list[FileResult], list[InputError]]:
    """Each script's result followed by the results of the modules of its project its conversion
    edits (FileResult.modules, issue 27), which take the place of the module's own result (a
    library module alone is left unchanged, MIG119); a module two conversions edit differently is
    an error for the run."""
    results = _each_script_once(results)
    edits: dict[str, FileResult] = {}
    clashes: list[InputError] = []
    owners: dict[str, str] = {}
    for result in results:
        for module in result.modules:
            real = os.path.realpath(module.path)
            if real in edits and edits[real].new != module.new:
                clashes.append(InputError(module.path, 0, 0, f"the conversions of {owners[real]} and {result.path} "
                                          "edit this module differently; nothing written"))
                continue
            edits.setdefault(real, module)
            owners.setdefault(real, result.path)
    if not edits:
        return results, clashes
    listed: list[FileResult] = []
    placed: set[str] = set()
    for result in results:
        real = os.path.realpath(result.path)
        if real in edits and not result.changed:
            continue
        listed.append(dataclasses.replace(result, modules=()) if result.modules else result)
        for module in result.modules:
            module_real = os.path.realpath(module.path)
            if module_real not in placed:
                placed.add(module_real)
                listed.append(edits[module_real])
    return listed, clashes


def _each_script_once(results: list[FileResult]) -> list[FileResult]:
    """One result per file: a script converted for itself and again through a module named on its
    own (MIG134) is listed once, as it was converted for itself."""
    seen: dict[str, int] = {}
    kept: list[FileResult] = []
    for result in results:
        real = os.path.realpath(result.path)
        if real in seen:
            if any(f.code == "MIG134" for f in kept[seen[real]].findings) and not any(f.code == "MIG134" for f in result.findings):
                kept[seen[real]] = result
            continue
        seen[real] = len(kept)
        kept.append(result)
    return kept


def migrate_file(path: str, target: str, options: Options | None = None) -> FileResult | InputError:
    """Read and convert one file; every failure becomes an InputError naming the file."""
    try:
        source = read(path)
        with _collector_paused():
            result = run_deep(migrate_source, source.text, target, options, path, read_from_disk)
    except InputError as error:
        return error
    except OptionsError:
        raise  # the caller's options, not this file: every file would fail the same way
    except RecursionError:
        return _internal(path, "nested too deeply to analyse; file left untouched")
    except MemoryError:
        return _internal(path, "out of memory; file left untouched")
    except Exception as error:  # a bug of ours: one file's failure must not stop the others
        return _internal(path, f"{type(error).__name__}: {error}; file left untouched "
                         "(please report it with the file)")
    if result.skipped and not result.modules:
        through = _through_its_entry_point(path, source.text, target, options)
        if through is not None:
            return through
    modules: list[FileResult] = []
    for module in result.modules:  # each written as the script is: checked against what was read
        try:
            read_again = read(module.path)
        except InputError as error:
            return error
        if read_again.text != module.old and read_again.text.replace("\r\n", "\n") == module.old:
            module = dataclasses.replace(module, old=read_again.text, new=module.new.replace("\n", "\r\n"))  # CRLF kept
        if read_again.text != module.old:
            return InputError(module.path, 0, 0, f"the conversion of {path} edits this module of its project, but it "
                              "reads differently as a file (line endings, encoding) than as a module: nothing changed")
        modules.append(dataclasses.replace(module, encoding=read_again.encoding, digest=read_again.digest))
    return dataclasses.replace(result, encoding=source.encoding, digest=source.digest, modules=tuple(modules))


def _through_its_entry_point(path: str, text: str, target: str, options: Options | None) -> FileResult | None:
    """A library module named on its own (MIG119, or MIG002 for one that only calls the step) whose
    folder has exactly one entry point importing it: that entry point's conversion, which reads the
    module with it (issue 27), with a note (MIG134) saying so. None otherwise."""
    from migrate.project import runs_when_started

    if runs_when_started(text):
        return None
    folder = os.path.dirname(path)
    importers, _runs = _importer_commands(path, target, read_from_disk)
    if len(importers) != 1:
        return None
    through = migrate_file(importers[0].path, target, options)
    if not isinstance(through, FileResult) or not through.changed or through.error:
        return None
    note = finding("MIG134", f"converted through {importers[0].describe(folder)}, the one entry point of its folder "
                             f"that imports {os.path.basename(path)}: launch that script", 1, 1)
    return dataclasses.replace(through, findings=(note, *through.findings))


def _internal(path: str, what: str) -> InputError:
    return InputError(path, 0, 0, f"internal error: {what}", code="MIG901")


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while one file converts: a big syntax tree makes every
    collection walk it again, and that alone made time per line grow with the file's size."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# Code nested a few hundred levels deep (a 600-term `+` chain, an 800-branch `elif`) is valid
# Python; libcst's tree and our visitors recurse once per level. A worker thread with a large
# stack and a high recursion limit converts it instead of failing.
DEEP_STACK_BYTES = 512 * 1024 * 1024
DEEP_RECURSION_LIMIT = 60_000


def run_deep(function: Callable[..., T], *args: object) -> T:
    """Call `function(*args)` on a thread whose stack fits deeply nested code; re-raise its error."""
    values: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            values.append(function(*args))
        except BaseException as error:  # handed to the caller's thread
            errors.append(error)

    previous_stack = threading.stack_size(DEEP_STACK_BYTES)
    previous_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous_limit, DEEP_RECURSION_LIMIT))
    try:
        worker = threading.Thread(target=target, name="migrate-convert")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(previous_stack)
        sys.setrecursionlimit(previous_limit)
    if errors:
        raise errors[0]
    return values[0]
