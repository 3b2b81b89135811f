"""What a script downloads, as units that run whole on one process.

A download is more than its write: `fetch(url, zip_path, out)` fetches, writes the archive,
unpacks it, renames the folder. Guarding the write alone leaves every rank reading an archive
that rank 0 has not finished (FileNotFoundError, BadZipFile). So the unit is:

- a call of the script's own download helper (a function that fetches from the network and
  writes a file: `requests.get` / `urlopen` plus an `open(p, "wb")`, an unpacking, a save; or a
  call that fetches to a file itself, `urllib.request.urlretrieve`, `gdown.download`, ...; and
  that calls nothing of torch's but such a download or a save: a function that builds or trains
  is no helper; also a function that calls a helper and otherwise only handles files and
  paths), or such a fetching call itself, or `requests.get` under a test of the filesystem;
- lifted to the `try:` around it whose handler downloads again (`try: fetch(URL) except
  RequestException: fetch(MIRROR)`: the handler runs only where the body failed, so the two are
  one unit, not one that moves and one "some ranks never reach");
- lifted to the outermost `if` around it in its function whose test reads the filesystem
  (`if not os.path.exists(p):`, or a name bound to such a test: `all_exist = all(p.exists() for
  p in files)`, `if not all_exist:`): that test must not run on the other ranks while rank 0
  writes, or a later rank skips the block (and a barrier in it) that an earlier one entered;
- with the statements right after it that unpack or move what it fetched (`extractall`,
  `os.rename`, `shutil.unpack_archive`), or call a file function of the script: one that only
  makes files from files (`make_csvs(out)`: writes a file, calls nothing of torch's); the unit
  runs such a function's statements too, where no other place calls it.

This module only finds units (and, with `filesystem_test_around`, the `if` of the filesystem
above any statement); steps/shared_files.py decides where one can run on one process per node,
followed by a barrier, and keeps every barrier it places out of such an `if`.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.analysis.index import CallSite, Scope, ScriptIndex, descendants, read_names, spell
from migrate.analysis.training import callers_of

# calls that fetch from the network and leave a file
FETCHES_TO_FILE = frozenset({
    "urllib.request.urlretrieve", "urllib.urlretrieve", "wget.download", "gdown.download", "gdown.cached_download",
    "gdown.download_folder", "torch.hub.download_url_to_file", "torchvision.datasets.utils.download_url",
    "torchvision.datasets.utils.download_and_extract_archive", "torchvision.datasets.utils.download_file_from_google_drive",
})
# calls that fetch bytes from the network (the script writes them)
FETCHES = frozenset({"requests.get", "requests.request", "urllib.request.urlopen", "urllib2.urlopen", "httpx.get"})
# what a helper does with the fetched bytes that leaves a file
WRITE_METHODS = frozenset({"extractall", "extract", "write_bytes", "write_text", "save"})
WRITE_CALLS = ("shutil.copyfileobj", "shutil.unpack_archive", "torch.save", "numpy.save", "json.dump", "pickle.dump")
# what unpacks or moves a fetched file, right after the fetch
UNPACKS = ("zipfile.", "tarfile.", "gzip.", "shutil.unpack_archive", "shutil.move", "os.rename", "os.replace", "os.remove")
# what a function that calls a helper may do besides, and still only prepare files
FILE_CALLS = ("os.", "shutil.", "zipfile.", "tarfile.", "gzip.", "pathlib.", "urllib.", "requests.", "logging.",
              "print", "open", "len", "str", "format", "sorted", "range", "enumerate") + tuple(FETCHES_TO_FILE)
FILE_METHODS = frozenset({"extractall", "extract", "close", "write", "read", "join", "format", "exists", "mkdir",
                          "unlink", "rename", "replace", "info", "warning", "is_dir", "is_file", "iterdir", "glob"})
# calls whose answer changes while another rank writes: a test built on one is read at a different moment per rank
FILESYSTEM_TESTS = ("os.path.exists", "os.path.isfile", "os.path.isdir", "os.path.lexists", "os.path.islink",
                    "os.path.ismount", "os.path.getsize", "os.path.getmtime", "os.path.getctime", "os.path.getatime",
                    "os.path.samefile", "os.listdir", "os.scandir", "glob.glob", "glob.iglob")
PATH_TESTS = frozenset({"exists", "is_file", "is_dir"})


def download_helpers(index: ScriptIndex) -> dict[str, Scope]:
    """The script's functions that download: by name (`fetch`, `Data.download`)."""
    def build() -> dict[str, Scope]:
        scopes = {name: scope for name, scope in index.functions.items() if not scope.is_module}
        found = {name: scope for name, scope in scopes.items() if _downloads_itself(index, scope)}
        grew = True
        while grew:  # a function that calls a helper and only handles files downloads too
            more = {name: scope for name, scope in scopes.items() if name not in found and _only_prepares(index, scope, found)}
            found.update(more)
            grew = bool(more)
        return found

    return index.derived("download_helpers", build)


def _downloads_itself(index: ScriptIndex, scope: Scope) -> bool:
    """It fetches to a file, or fetches and writes; and it calls nothing of torch's but a download or a
    save (a function that builds a model or trains is no helper: its own download is a site)."""
    calls = index.calls_from(scope)
    if any((call.name or "").startswith("torch.") and call.name not in FETCHES_TO_FILE and call.name not in WRITE_CALLS
           for call in calls):
        return False
    if any(call.name in FETCHES_TO_FILE for call in calls):
        return True
    return any(call.name in FETCHES for call in calls) and any(_writes(index, call) for call in calls)


def _only_prepares(index: ScriptIndex, scope: Scope, helpers: dict[str, Scope]) -> bool:
    """`prepare()` calling `fetch()`, then unpacking: it calls a helper, and its other calls only
    handle files, paths and messages (no model, no data loading: not the training function)."""
    calls = index.calls_from(scope)
    if not any(helper_called(index, call, helpers) for call in calls):
        return False
    for call in calls:
        name = call.name or ""
        handles_file = isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value in FILE_METHODS
        if not (helper_called(index, call, helpers) or name.startswith(FILE_CALLS) or handles_file or _writes(index, call)):
            return False
    return True


def _writes(index: ScriptIndex, call: CallSite) -> bool:
    """`open(p, "wb")` (any mode that writes, any opener: `gzip.open(p, "wb")`), `z.extractall(d)`,
    `p.write_bytes(b)`, a save."""
    node = call.node
    mode = opener_mode(index, node)
    if mode is not None:
        return writes_in_mode(mode)
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in WRITE_METHODS and call.name not in FETCHES:
        return True
    return (call.name or "") in WRITE_CALLS


# what opens a file, given a mode as `open` takes it (`mode=`, or the second argument)
OPENERS = frozenset({"open", "io.open", "codecs.open", "bz2.open", "bz2.BZ2File", "gzip.open", "gzip.GzipFile",
                     "lzma.open", "lzma.LZMAFile", "tarfile.open", "zipfile.ZipFile"})
FILE_MODE = re.compile(r"[rwaxbtU+]{1,4}(:[a-z0-9]*)?")  # "wb", "a+", "w:gz" (tarfile)


def opener_mode(index: ScriptIndex, call: cst.Call) -> str | None:
    """The mode a call that opens a file is given: `open(p, "w")`, `bz2.open(p, "wb")`,
    `gzip.open(p, mode="at")`, `tarfile.open(p, "w:gz")`, and any other call given a file mode
    whose name says it opens (`h5py.File(p, "w")`, `fsspec.open(p, "wb")`, `tables.open_file(...)`:
    the keyword `mode`, or a second argument spelled as one). "r" for an opener given none; None
    for a call that opens nothing, or whose mode is not written out."""
    name = index.qualify(call.func) or spell(call.func) or ""
    given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "mode"), None)
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if given is None and len(positional) > 1:
        given = positional[1]
    if given is None:
        return "r" if name in OPENERS else None
    if not isinstance(given, cst.SimpleString):
        return None
    mode = str(given.evaluated_value)
    last = name.rsplit(".", 1)[-1].lower()
    if name in OPENERS or ("open" in last or last.endswith("file")) and FILE_MODE.fullmatch(mode) and positional:
        return mode
    return None


def writes_in_mode(mode: str) -> bool:
    """A mode that writes: "w", "a", "x", or "+" (`r+` included)."""
    return any(c in mode for c in "wax+")


def helper_called(index: ScriptIndex, call: CallSite, helpers: dict[str, Scope]) -> Scope | None:
    """The download helper `call` runs: `fetch(...)`, or `self.download()` in a method of its class."""
    name = call.name or ""
    if name in helpers:
        return helpers[name]
    class_name = call.place.scope.class_name
    if name.startswith("self.") and class_name is not None:
        return helpers.get(f"{class_name}.{name.removeprefix('self.')}")
    return None


def download_sites(index: ScriptIndex) -> list[CallSite]:
    """The calls that download, outside the helpers (their callers are the sites), in source order."""
    helpers = download_helpers(index)
    inside = {id(scope) for scope in helpers.values()}
    found: list[CallSite] = []
    for call in index.calls:
        if id(call.place.scope) in inside:
            continue
        if call.name in FETCHES_TO_FILE or helper_called(index, call, helpers) is not None:
            found.append(call)
        elif call.name in FETCHES and filesystem_test_around(index, call.place.stmt) is not None:
            found.append(call)
    return found


def unit_of(index: ScriptIndex, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
    """The statements of one block that make the download `stmt` holds: the outermost `if` that
    tests the filesystem around it (else the `try:` that downloads again in a handler, else the
    statement itself), then the unpacking and file handling right after."""
    start = retrying_try(index, stmt) or stmt
    top = filesystem_test_around(index, start) or start
    located = index.block_of.get(top)
    if located is None:
        return [top]
    block, position = located
    unit = [top]
    for later in block.body[position + 1:]:
        if not _unpacks(index, later):
            break
        unit.append(later)
    return unit


def retrying_try(index: ScriptIndex, stmt: cst.BaseStatement) -> cst.Try | None:
    """The outermost `try:` around `stmt`, in its own function, whose body downloads and one of
    whose handlers downloads again (`except RequestException: fetch(BACKUP, ...)`): one unit, since
    the handler runs only where the body failed (a barrier there would be met by some ranks only)."""
    found = None
    for around in index.enclosing_statements(stmt)[1:]:
        if isinstance(around, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(around, cst.Try) and _downloads_under(index, around.body) and any(
                _downloads_under(index, handler.body) for handler in around.handlers):
            found = around
    return found


def _downloads_under(index: ScriptIndex, node: cst.CSTNode) -> bool:
    """A call of a download helper, or one that fetches to a file, under `node`."""
    helpers = download_helpers(index)
    for call in index.calls_under(node):
        site = index.call_site(call)
        if site is not None and (site.name in FETCHES_TO_FILE or helper_called(index, site, helpers) is not None):
            return True
    return False


def filesystem_test_around(index: ScriptIndex, stmt: cst.BaseStatement) -> cst.If | None:
    """The outermost `if` around `stmt`, in its own function, whose test reads the filesystem
    (itself, or through a name bound to such a test: `if not all_exist:`): a barrier placed under
    it is skipped by a rank that tests after another rank has written."""
    found = None
    for around in index.enclosing_statements(stmt)[1:]:
        if isinstance(around, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(around, cst.If) and (tests_filesystem(index, around.test) or _names_a_filesystem_test(index, around)):
            found = around
    return found


def _names_a_filesystem_test(index: ScriptIndex, stmt: cst.If) -> bool:
    """`if not all_exist:` where `all_exist = all(p.exists() for p in paths)` in the same function:
    each rank read the answer from the filesystem at its own moment."""
    scope = index.scope_of.get(stmt)
    if scope is None:
        return False
    return any(binding.value is not None and tests_filesystem(index, binding.value)
               for name in read_names(stmt.test) if "." not in name
               for binding in index.bindings_of_in(name, scope))


def tests_filesystem(index: ScriptIndex, test: cst.BaseExpression) -> bool:
    """`os.path.exists(p)`, `Path(p).exists()`, `not os.listdir(d)`, ... anywhere in the test."""
    for node in descendants(test):
        if not isinstance(node, cst.Call):
            continue
        if (index.qualify(node.func) or "") in FILESYSTEM_TESTS:
            return True
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in PATH_TESTS and not node.args:
            return True
    return False


def _unpacks(index: ScriptIndex, stmt: cst.BaseStatement) -> bool:
    """A statement whose calls only unpack, move or remove files (`with zipfile.ZipFile(p) as z:
    z.extractall(d)`, `os.rename(a, b)`), or a call standing alone of a function of the script
    that only makes files from files (`make_csvs(out)`, see `file_functions`)."""
    if _calls_file_function(index, stmt):
        return True
    calls = index.calls_under(stmt)
    if not calls:
        return False
    for call in calls:
        qualified = index.qualify(call.func) or ""
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
        if not (qualified.startswith(UNPACKS) or method in ("extractall", "extract", "close")):
            return False
    return True


# what a function that only makes files from files may not call: a model, a collective
NOT_FILE_WORK = ("torch.", "horovod.", "deepspeed.", "accelerate.", "lightning.", "pytorch_lightning.")
# what writes a file besides `_writes` (a table)
TABLE_WRITES = frozenset({"to_csv", "to_json", "to_parquet", "to_pickle", "to_feather", "to_excel"})


def file_functions(index: ScriptIndex) -> dict[str, Scope]:
    """The script's top-level functions, not download helpers, that make files from files
    (`make_csvs(out)`: reads the unpacked data, writes `train.csv`): they write a file, call
    nothing of torch's (nor of another distributed library), call only such functions of the
    script (or ones that call nothing of torch's either), and declare no `global`. Run right after
    a download, they belong to its unit."""
    def build() -> dict[str, Scope]:
        helpers = download_helpers(index)
        found: dict[str, Scope] = {}
        for name, scope in index.functions.items():
            if scope.is_module or scope.class_name is not None or name in helpers:
                continue
            calls = index.calls_from(scope)
            if _torch_free(index, scope, 0) and any(_writes(index, c) or _writes_table(c) for c in calls):
                found[name] = scope
        return found

    return index.derived("file_functions", build)


def _writes_table(call: CallSite) -> bool:
    return isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value in TABLE_WRITES


def _torch_free(index: ScriptIndex, scope: Scope, depth: int) -> bool:
    """No call of torch's (or another distributed library's), no `global`/`nonlocal`, and the
    script's functions it calls are the same (a few levels deep)."""
    if depth > 3 or any(isinstance(n, (cst.Global, cst.Nonlocal)) for n in descendants(scope.node)):
        return False
    for call in index.calls_from(scope):
        if (call.name or "").startswith(NOT_FILE_WORK):
            return False
        callee = index.functions.get(call.name or "")
        if callee is not None and callee is not scope and not _torch_free(index, callee, depth + 1):
            return False
    return True


def _calls_file_function(index: ScriptIndex, stmt: cst.BaseStatement) -> bool:
    """`make_csvs(out)` standing alone (its answer, if any, unused)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
        return False
    site = index.call_site(small.value)
    return site is not None and (site.name or "") in file_functions(index)


def what_runs(index: ScriptIndex, unit: list[cst.BaseStatement]) -> tuple[list[cst.BaseStatement], list[Scope]]:
    """Every statement the unit runs (its own, those of the helpers it calls, at any depth, and
    those of the file functions it calls that no other place calls), and those functions."""
    excluded: set[int] = set()
    while True:
        seen, helpers, files = _reached(index, unit, excluded)
        called_elsewhere = {id(scope) for scope in files
                            if any(id(call.place.stmt) not in seen for call in callers_of(index, scope))}
        if not called_elsewhere:
            return list(seen.values()), helpers + files
        excluded |= called_elsewhere


def _reached(index: ScriptIndex, unit: list[cst.BaseStatement],
             excluded: set[int]) -> tuple[dict[int, cst.BaseStatement], list[Scope], list[Scope]]:
    """The statements under the unit and the helpers and file functions (but `excluded`) it calls,
    at any depth; those helpers; those file functions."""
    helpers, files = download_helpers(index), file_functions(index)
    seen: dict[int, cst.BaseStatement] = {}
    scopes: dict[int, Scope] = {}
    followed: dict[int, Scope] = {}
    pending: list[cst.CSTNode] = list(unit)
    while pending:
        node = pending.pop()
        for inner in descendants(node):
            if isinstance(inner, cst.BaseStatement):
                seen.setdefault(id(inner), inner)
            site = index.call_site(inner) if isinstance(inner, cst.Call) else None
            scope = helper_called(index, site, helpers) if site is not None else None
            if scope is not None and id(scope) not in scopes:
                scopes[id(scope)] = scope
                pending.append(scope.node)
            other = files.get(site.name or "") if site is not None else None
            if other is not None and id(other) not in followed and id(other) not in excluded:
                followed[id(other)] = other
                pending.append(other.node)
    return seen, list(scopes.values()), list(followed.values())
