"""The library API: convert source text, or files on disk, to a target.

`migrate_source` is pure (text in, FileResult out). `migrate_paths` adds reading (encoding
cookies, CRLF kept), the cheap textual prefilter, and atomic writes. libcst is imported only
here and below, on first use, so the CLI starts fast.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

from migrate.findings import finding
from migrate.model import FileResult, InputError, Options

# A file without these words cannot be a training loop: skip it before parsing.
PREFILTER_WORDS = ("backward",)
# Findings that describe a change to the file (setup placed, a wrapper replaced): dropped when a
# later step refuses the file, which is then left exactly as it was.
ONLY_WHEN_CONVERTED = frozenset({"MIG003", "MIG107", "MIG108"})


def read_source(path: str) -> tuple[str, str]:
    """(text, encoding). Honours a PEP 263 cookie and a BOM; raises InputError otherwise."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(path, 0, 0, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, 0, 0, "is a directory, not a Python file") from None
    except OSError as error:
        raise InputError(path, 0, 0, f"cannot read: {error.strerror}") from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as error:
        if b"coding" in b"\n".join(raw.splitlines()[:2]):
            raise InputError(path, 1, 1, f"bad coding cookie: {error}") from None
        encoding = "utf-8"  # undecodable bytes in the first lines: let the decoder say where
    try:
        return raw.decode(encoding), encoding
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        col = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise InputError(path, line, col, f"not valid {encoding} (byte 0x{raw[error.start]:02x}); "
                         "add a coding cookie such as `# -*- coding: latin-1 -*-`") from None


def migrate_source(code: str, target: str, options: Options | None = None, path: str = "train.py") -> FileResult:
    """Convert one script's text. Raises InputError on a syntax error; never writes anything."""
    import libcst as cst

    from migrate.analysis import analyze
    from migrate.rewrite import EditPlan
    from migrate.steps.base import Context
    from migrate.targets import targets

    options = options or Options()
    spec = targets()[target]
    if not any(word in code for word in PREFILTER_WORDS):
        _check_syntax(code, path)
        imported = {m: m for m in re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", code, re.MULTILINE)}
        return _skipped(path, code, "MIG002", _no_backward_message(imported))
    _check_syntax(code, path)
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError as error:
        raise InputError(path, error.raw_line, error.raw_column + 1, f"syntax error: {error.message}") from None
    sites = analyze(module)
    if not sites.backward_calls:
        return _skipped(path, code, "MIG002", _no_backward_message(sites.index.imports))
    if sites.already is not None:
        verb = "already uses" if sites.already in spec.already else "uses"
        return _skipped(path, code, "MIG001", f"{verb} {sites.already}; left unchanged")
    if sites.entry is not None and sites.entry.library:
        return FileResult(path=path, old=code, new=code, findings=(_library_finding(sites, code),), skipped=True)
    built_early = _import_time_finding(sites, code)
    if built_early is not None:
        return FileResult(path=path, old=code, new=code, findings=(built_early,), skipped=True)
    plan = EditPlan(module=module)
    ctx = Context(sites=sites, plan=plan, options=options, source=code, script=os.path.basename(path))
    for step in spec.steps:
        step(ctx)
        if ctx.refused:
            kept = tuple(f for f in ctx.findings if f.code not in ONLY_WHEN_CONVERTED)
            return FileResult(path=path, old=code, new=code, findings=kept, skipped=True)
    new_code = plan.apply(sites.index.import_stmts, _imports_stdlib).code
    findings = tuple(sorted(ctx.findings, key=lambda f: (f.line, f.col, f.code)))
    try:
        compile(new_code, path, "exec")
    except SyntaxError as error:
        message = f"internal error: the rewrite did not compile ({error.msg}, line {error.lineno}); file left untouched"
        return FileResult(path=path, old=code, new=code, findings=(finding("MIG901", message),), error=True)
    return FileResult(path=path, old=code, new=new_code, findings=findings, artifacts=tuple(spec.artifacts(path, ctx)))


def _library_finding(sites, code: str):  # type: ignore[no-untyped-def]
    """MIG119 for a module that only defines functions and classes: which ones train, and where."""
    from migrate.analysis.positions import Positions

    trainers: list[str] = []
    for call in sites.backward_calls:
        name = call.place.scope.name
        if name not in trainers:
            trainers.append(name)
    first = sites.index.functions[trainers[0]].node if trainers and trainers[0] in sites.index.functions else None
    line, col = Positions(sites.index.module, code).of(first) if first is not None else (1, 1)
    named = ", ".join(f"`{name}()`" for name in trainers[:3]) + (", ..." if len(trainers) > 3 else "")
    message = (
        f"no entry point: this file only defines functions and classes ({named} runs backward) and has no "
        '`if __name__ == "__main__":` block or top-level code that trains, so it is a module other code imports; '
        "setting up (and tearing down) a process group on import would break the caller. Left unchanged: "
        "convert the script that calls it"
    )
    return finding("MIG119", message, line, col)


def _import_time_finding(sites, code: str):  # type: ignore[no-untyped-def]
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
    seen: list[tuple[object, str]] = [(_model_statement(site), f"the model `{site.spelling}`") for site in sites.models]
    seen += [(site.call.place.stmt, f"the training DataLoader `{site.spelling}`" if site.spelling else "the training DataLoader")
             for site in sites.loaders]
    early = [(stmt, what) for stmt, what in seen if stmt is not None and _at_module_level(index, stmt)]
    if not early:
        return None
    positions = Positions(index.module, code)
    stmt, what = min(early, key=lambda pair: positions.of(pair[0]))
    line, col = positions.of(stmt)
    function = entry.scope.name
    message = (
        f"{what} is built at import time (line {line}) but training starts in `{function}()`: process-group "
        f"setup belongs in `{function}()`, and module-level code runs before it, so neither the "
        f"distributed wrapper nor the DistributedSampler can be built there. Left unchanged: build it inside "
        f"`{function}()` (or pass it in), then convert again, or convert by hand"
    )
    return finding("MIG124", message, line, col)


def _at_module_level(index, stmt) -> bool:  # type: ignore[no-untyped-def]
    """Whether `stmt` runs as module-level code: not inside a def or a class."""
    import libcst as cst

    return all(not isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in index.enclosing_statements(stmt))


# Packages that hold no training loop of the user's: not worth naming in MIG002.
KNOWN_PACKAGES = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "numpy", "scipy", "pandas", "sklearn", "matplotlib",
    "PIL", "cv2", "tqdm", "yaml", "wandb", "tensorboard", "tensorboardX", "transformers", "datasets", "gym",
    "gymnasium", "einops", "timm", "deepspeed", "accelerate", "lightning", "pytorch_lightning",
})


def _no_backward_message(imports: dict[str, str]) -> str:
    """MIG002, naming the script's own modules where the training loop may live instead."""
    import sys

    roots = sorted({q.split(".")[0] for q in imports.values()} - KNOWN_PACKAGES - set(sys.stdlib_module_names) - {""})
    if not roots:
        return "not a training script (no backward pass); left unchanged"
    named = ", ".join(f"`{r}`" for r in roots[:4])
    return (f"no backward pass in this file; left unchanged (if the training loop runs in a module it imports, "
            f"such as {named}, convert that file)")


def _check_syntax(code: str, path: str) -> None:
    """CPython's own parser first: its messages and positions are the ones users know."""
    import ast

    try:
        compile(code, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        raise InputError(path, error.lineno or 0, error.offset or 0, f"syntax error: {error.msg}") from None


def _imports_stdlib(stmt: object) -> bool:
    """Whether an import line brings in a standard-library module (`import os`, `from typing import ...`)."""
    import sys

    import libcst as cst

    assert isinstance(stmt, cst.SimpleStatementLine)
    small = stmt.body[0]
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


def migrate_paths(paths: Iterable[str], target: str, options: Options | None = None) -> Iterator[FileResult | InputError]:
    """Convert each file (directories are searched for *.py). Yields InputError for bad input."""
    for path in expand_paths(paths):
        try:
            code, _encoding = read_source(path)
            yield migrate_source(code, target, options, path)
        except InputError as error:
            yield error


def expand_paths(paths: Iterable[str]) -> Iterator[str]:
    for path in paths:
        if os.path.isdir(path):
            yield from sorted(str(p) for p in Path(path).rglob("*.py") if ".venv" not in p.parts)
        else:
            yield path


def write_result(result: FileResult) -> None:
    """Write the converted file and its artifacts, each atomically (temp file, then rename).

    The original's mode bits and encoding are kept. An existing artifact is overwritten only
    with the same content: a user's own file of that name is an error, not a casualty.
    """
    check_writable(result)
    if result.new != result.old:
        _, encoding = read_source(result.path)
        _atomic_write(result.path, result.new.encode(encoding), mode=os.stat(result.path).st_mode & 0o7777)
    for artifact in result.artifacts:
        if os.path.exists(artifact.path) and Path(artifact.path).read_text() != artifact.text:
            raise InputError(artifact.path, 0, 0, "exists and differs from what would be generated; move it away first")
        _atomic_write(artifact.path, artifact.text.encode(), mode=0o755 if artifact.executable else 0o644)


def check_writable(result: FileResult) -> None:
    """Raise InputError unless every file this result writes can be written (checked up front,
    so a batch stops before its first write). Read-only mode bits count even for root."""
    targets = [result.path] if result.new != result.old else []
    for path in targets + [a.path for a in result.artifacts]:
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.exists(path):
            if not os.stat(path).st_mode & 0o222 or not os.access(path, os.W_OK):
                raise InputError(path, 0, 0, "is read-only; nothing was written")
        else:
            existing = folder
            while not os.path.isdir(existing):
                existing = os.path.dirname(existing)
            if not os.access(existing, os.W_OK):
                raise InputError(path, 0, 0, f"cannot create a file in {folder}; nothing was written")


def _atomic_write(path: str, data: bytes, mode: int) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".migrate-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
