"""Files every rank would touch at once: each rank runs the whole script, so what a single
process did to the filesystem now happens N times, concurrently.

- Dataset downloads (`download=True`): the first process on each node downloads, then a barrier,
  then every rank builds the dataset from the files (torchvision skips a download it finds done).
- The script's own downloads (a helper that fetches and writes, `urlretrieve`, ...; see
  download_units.py): the whole unit (with the `if not os.path.exists(p):` around it, a `try:`
  whose handler downloads from a mirror, and the unpacking and file functions after it) on the
  first process of each node, then a barrier; the helper's own writes, moves and directories are
  left as they are (it runs on that one process). Where the unit binds a name read below, may run
  a collective, or no barrier can be placed, a finding names the line; its helpers are then left
  whole on every rank (no write on rank 0 alone that every rank reads back), their other calls too.
- A dataset download in a lambda chosen from a table (`choices = {"a": lambda: A(root, download=True),
  ...}`, `make = choices[name]`, `return make()`) runs where the lambda is called, and only the chosen
  one: that call is made first on the first process of each node, then a barrier, then on every
  rank (`if local_rank == 0: make()`, barrier, `return make()`). Where the call cannot be found (the
  table is handed on) or no barrier can go before it, MIG120 names the download and nothing moves.
- `os.mkdir` / `os.makedirs` / `Path.mkdir` (without `exist_ok`, or with `exist_ok=False`):
  `exist_ok=True`, so the rank that comes second does not crash on the directory the first one
  made (`if not exists: mkdir` is a race, not a guard). Where the script relies on the error (a
  `try:` whose handler does more than `pass`) or the name is made per run (a time stamp), the
  statement runs on rank 0, then a barrier (also for a name numbered from the folders that exist:
  `run_id = len(glob.glob("runs/exp_*"))`); where that cannot be, a finding names the line.
- Deleting, moving, renaming or copying files (`shutil.rmtree`, `os.replace`, `os.remove`, ...):
  on rank 0, with the directories made right after them, in any of those spellings (one guarded
  run); when other ranks need what the run made, a barrier follows it.
- `f = open(path, "w")` (or any opener given a mode that writes: `gzip.open(path, "wt")`) and the
  writes and close that follow: the whole sequence on rank 0.
- A file rank 0 saves and every rank loads again (`torch.save(..., p)` ... `torch.load(p)`; a
  table, `df.to_csv("train.csv")` ... any call handed `"train.csv"`): a barrier before the load, so
  no rank reads it half written or stale; one barrier serves every load after the saves above it.
  After teardown (no barrier left), the load and the rest of its block run on rank 0 as well.

A barrier is added only where every rank reaches it: after setup, before teardown, not in a `try:`
whose handlers may go on (in the body or `else:` of one whose every handler ends by raising it
may: a rank that gets no further fails, and the launcher stops the others), and not under
a condition that may differ between ranks (a loss, a metric, a rank, or a test of the filesystem:
`if not os.path.exists(p):` is read at a different moment on each rank, and one that tests after
rank 0 wrote `p` skips the block). Under such a test the whole outermost `if` runs on rank 0 and the
barrier follows it; a download moves above it, under the tests that lead to it (`if local_rank == 0
and not os.path.exists(root):`); a load of a file rank 0 saved earlier waits above it; where none
of these can be (the `if` binds a name read below, may need every rank, or also holds the save),
MIG120 names the `if`. Nor is a barrier added in a function or a
class's `__init__` called from such a place or from a statement a step put on rank 0 (a dataset
built on rank 0 alone would meet a barrier the other ranks never reach). Where that cannot be told, the
finding says what was seen and what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from migrate.analysis.entry import runs_in_process_group
from migrate.analysis.index import CallSite, Scope, ScriptIndex, descendants, names_in, read_names, spell
from migrate.analysis.syntax import argument, calls_in, contains
from migrate.analysis.training import callers_of
from migrate.rewrite import with_fields
from migrate.steps.base import Context, expression, statements
from migrate.steps.download_units import (
    download_sites,
    filesystem_test_around,
    opener_mode,
    tests_filesystem,
    unit_of,
    what_runs,
    writes_in_mode,
)
from migrate.steps.rank_zero import (
    RANK_WORDS,
    SAVES,
    TABLE_WRITES,
    after_teardown,
    collective_call,
    launcher_rank_zero_test,
    may_be_collective,
    may_guard,
    runs_on_rank_zero,
    table_file,
    under_rank_check,
)

MAKE_DIRS = ("os.mkdir", "os.makedirs")
PATH_MKDIR_KEYWORDS = frozenset({"mode", "parents", "exist_ok"})
PER_RUN = ("time.", "datetime.", "uuid.")  # what makes a name new on each run (and on each rank)
LISTINGS = frozenset({"glob.glob", "glob.iglob", "os.listdir", "os.scandir"})  # a name numbered from what exists
EXITS = ("sys.exit", "exit", "quit", "os._exit")
DESTRUCTIVE = (
    "os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir", "os.removedirs",
    "shutil.rmtree", "shutil.move", "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree",
)
# calls that leave a file at their second argument (keyword name when passed by keyword)
WRITES_TO = {
    "torch.save": "f", "shutil.copy": "dst", "shutil.copy2": "dst", "shutil.copyfile": "dst",
    "shutil.move": "dst", "os.replace": "dst", "os.rename": "dst",
}
HANDLE_METHODS = frozenset({"write", "writelines", "flush", "close"})
TRANSFORM_KEYWORDS = frozenset({"transform", "target_transform", "transforms"})
OS_ERRORS = frozenset({"OSError", "FileExistsError", "IOError", "Exception", "BaseException"})


def shared_files(ctx: Context) -> None:
    units = _download_units(ctx)  # what they run is on one process per node: none of the edits below
    guarded = [run for run in _destructive_runs(ctx) if id(run[0]) not in units and _guard_run(ctx, run)]
    in_runs = {id(stmt) for run in guarded for stmt in run} | units
    for call in ctx.index.calls:
        if _makes_directory(ctx, call) and id(_top_of_run(ctx, call.place.stmt)) not in in_runs:
            _directory(ctx, call)
    _downloads(ctx, units)
    _file_handles(ctx, units)
    _load_after_save(ctx)


# -- who may run what ------------------------------------------------------------------------

def every_rank_reaches(ctx: Context, stmt: cst.BaseStatement, depth: int = 0) -> bool:
    """Whether a barrier at `stmt` is met by every rank: it runs in the process group, under no
    `while`/`try`, and under no `if` whose test may differ per rank (only tests on the parsed
    command line or constants are known to agree); in a function, the same holds where it is called."""
    if not may_guard(ctx, stmt):
        return False
    index = ctx.index
    # put on rank 0 by a step before: a statement around it, or a call that leads here (the
    # barrier itself goes beside `stmt`, outside a guard of `stmt` alone)
    if any(a in ctx.plan.guarded for a in index.enclosing_statements(stmt)[0 if depth else 1:]):
        return False
    chain = index.enclosing_statements(stmt)
    for inner, ancestor in zip(chain, chain[1:]):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(ancestor, cst.Try) and _every_handler_raises(ctx, ancestor, inner):
            continue
        if isinstance(ancestor, (cst.While, cst.Try, cst.TryStar)):
            return False
        if isinstance(ancestor, cst.If) and ancestor is not index.main_guard and not _agrees_on_every_rank(
                ctx, ancestor.test, index.scope_of.get(ancestor)):
            return False
    scope = index.scope_of.get(stmt)
    entry = ctx.sites.entry
    if scope is None or scope.is_module or (entry is not None and scope is entry.scope) or depth > 4:
        return True
    known = index.memo("every_rank_reaches")  # callers' callers fan out: each (call, depth) is decided once
    for call in callers(index, scope):
        key = (call.place.stmt, depth + 1)
        if key not in known:
            known[key] = every_rank_reaches(ctx, call.place.stmt, depth + 1)
        if not known[key]:
            return False
    return True


def _every_handler_raises(ctx: Context, stmt: cst.Try, inner: cst.BaseStatement) -> bool:
    """`inner` stands in the body or the `else:` of `stmt`, and every handler ends by raising
    (`except KeyError: raise InvalidChoice()`): a rank that does not get there fails, and the
    launcher stops the others; every rank that goes on passes here."""
    block = ctx.index.block_of.get(inner, (None, 0))[0]
    if block is not stmt.body and not (stmt.orelse is not None and block is stmt.orelse.body):
        return False
    return bool(stmt.handlers) and all(
        isinstance(handler.body, cst.IndentedBlock) and isinstance(last := handler.body.body[-1], cst.SimpleStatementLine)
        and isinstance(last.body[-1], cst.Raise) for handler in stmt.handlers)


def some_ranks_only(ctx: Context, stmt: cst.BaseStatement, depth: int = 0) -> bool:
    """Whether `stmt` runs on some ranks only, as far as this file tells: under a rank check (the
    script's own or one a step put there), or in a function (a class's `__init__`: where the class
    is built) called from such a place. A collective placed there hangs the other ranks."""
    index = ctx.index
    if under_rank_check(ctx, stmt, itself=True) or any(a in ctx.plan.guarded for a in index.enclosing_statements(stmt)):
        return True
    scope = index.scope_of.get(stmt)
    if scope is None or scope.is_module or depth > 4:
        return False
    return any(some_ranks_only(ctx, call.place.stmt, depth + 1) for call in callers(index, scope))


def callers(index: ScriptIndex, scope: Scope) -> list[CallSite]:
    """The calls that run `scope`: its callers, and for a class's `__init__` the calls that build
    the class (`Digits(root)`)."""
    found = list(callers_of(index, scope))
    if scope.class_name and scope.name == f"{scope.class_name}.__init__":
        found += [call for call in index.calls if scope.class_name in (call.name, spell(call.node.func))]
    return found


# what scripts call to read their command line through a helper (`args = py.args()`, `opt = parse_opt()`)
ARGUMENT_READERS = frozenset({"args", "get_args", "parse_opt", "parse_arguments", "get_arguments", "parse_option"})


def _agrees_on_every_rank(ctx: Context, test: cst.BaseExpression, scope: Scope | None = None, depth: int = 0) -> bool:
    """A test that reads only the command line (`args.x`), constants and the environment, or
    parameters of its function (`scope`) that every caller hands such a value (`if dataset ==
    "mnist":` in `make_dataset(dataset)` called as `make_dataset(args.dataset)`), names no rank
    (`args.local_rank` differs per process) and reads no file: `os.path.exists(p)` is read at a
    different moment on each rank, and a rank that tests after another one wrote takes the other branch."""
    index = ctx.index
    if any(word in ctx.code(test) for word in RANK_WORDS) or tests_filesystem(index, test):
        return False
    parsed = index.derived("parsed_args_names", lambda: {
        b.target for b in index.bindings
        if isinstance(b.value, cst.Call) and (
            isinstance(b.value.func, cst.Attribute) and b.value.func.attr.value.startswith(("parse_args", "parse_known_args"))
            or (spell(b.value.func) or "").rsplit(".", 1)[-1] in ARGUMENT_READERS)
    })
    for name in read_names(test):
        head = name.split(".")[0]
        if head in parsed or head in ("os", "True", "False", "None") or head.isupper():
            continue
        if head in index.imports and index.imports[head] in ("os", "sys"):
            continue
        if scope is not None and depth < 3 and _handed_agreeing_values(ctx, head, scope, test, depth):
            continue
        return False
    return not calls_in(test) or all((index.qualify(c.func) or "").startswith(("os.path.", "os.environ")) for c in calls_in(test))


def _handed_agreeing_values(ctx: Context, param: str, scope: Scope, test: cst.BaseExpression, depth: int) -> bool:
    """Whether `param`, a parameter of `scope` not bound again before `test`, is handed by every
    caller a value that agrees on every rank (`make_dataset(args.dataset)`)."""
    index = ctx.index
    if param not in scope.params or param == "self" or not isinstance(scope.node, cst.FunctionDef):
        return False
    if any(ctx.position(b.node) < ctx.position(test) and not _other_branch(ctx, b.place.stmt, test)
           for b in index.bindings_of_in(param, scope)):
        return False
    position = scope.params.index(param) - (1 if scope.class_name else 0)
    calls = callers(index, scope)
    for call in calls:
        arg = argument(call.node, param, position)
        if arg is None or not _agrees_on_every_rank(ctx, arg.value, call.place.scope, depth + 1):
            return False
    return bool(calls)


def _other_branch(ctx: Context, stmt: cst.BaseStatement, test: cst.BaseExpression) -> bool:
    """Whether `stmt` is in the body of an `if` whose `elif`/`else` holds `test`: it never runs before it."""
    for around in ctx.index.enclosing_statements(stmt):
        if isinstance(around, cst.If) and around.orelse is not None and _holds(around.body, stmt) and _holds(around.orelse, test):
            return True
    return False


def _holds(node: cst.CSTNode, inner: cst.CSTNode) -> bool:
    return any(n is inner for n in descendants(node))


def _barrier(ctx: Context, comment: str) -> cst.BaseStatement:
    return statements(f"{ctx.barrier()}  # {comment}\n")[0]


# -- a barrier under a test of the filesystem ----------------------------------------------------
# `if not os.path.exists(p):` is read at a different moment on each rank: one that tests after rank
# 0 has written `p` skips the block, and a barrier in it waits forever. So a barrier never goes
# under such an `if`: the whole `if` runs on rank 0 and the barrier follows it, or the barrier goes
# above it, or a finding names the `if`.

LEAVES_EARLY = (cst.Return, cst.Break, cst.Continue)


def _filesystem_if(ctx: Context, stmt: cst.BaseStatement) -> cst.If | None:
    """The outermost `if` around `stmt` in its function whose test reads the filesystem, unless
    it already runs on one rank (then no barrier goes there anyway)."""
    top = filesystem_test_around(ctx.index, stmt)
    return top if top is not None and not runs_on_rank_zero(ctx, top) else None


def _whole_if_problem(ctx: Context, top: cst.If) -> str | None:
    """Why the whole `if` cannot run on rank 0 alone, followed by a barrier (words for the
    finding); None when it can."""
    if not every_rank_reaches(ctx, top):
        return ("and no barrier can be placed after it (before setup, under a condition that may differ per rank, "
                "or in code some ranks never reach)")
    collective = collective_call(ctx, top)
    if collective is not None:
        return f"since `{ctx.code(collective.func)}(...)` in it may need every rank"
    below = [s for s in _statements_below(top) if isinstance(s, cst.BaseStatement)]
    leaving = next((s for s in below if _leaves(ctx, s, top)), None)
    if leaving is not None:
        return f"since `{_first_line(ctx, leaving)}` would leave early on rank 0 alone"
    bound = _bound_and_read_elsewhere(ctx, top, [top, *below])
    return f"since it {bound}" if bound is not None else None


def _leaves(ctx: Context, stmt: cst.BaseStatement, top: cst.If) -> bool:
    """`return` in the `if`, or a `break`/`continue` of a loop around it."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    kinds = {type(small) for small in stmt.body if isinstance(small, LEAVES_EARLY)}
    if cst.Return in kinds:
        return True
    loops = ctx.index.enclosing_statements(stmt)
    inner_loop = any(isinstance(s, (cst.For, cst.While)) for s in loops[1:loops.index(top)]) if top in loops else False
    return bool(kinds) and not inner_loop


def _bound_and_read_elsewhere(ctx: Context, first: cst.BaseStatement, inside: list[cst.BaseStatement]) -> str | None:
    """A name bound in `inside` (in `first`'s function) and read by a statement outside it: that
    statement runs on every rank, the binding would be on one."""
    scope = ctx.index.scope_of.get(first)
    ids = {id(stmt) for stmt in inside}
    for stmt in inside:
        for binding in ctx.index.bindings_at(stmt):
            if scope is None or binding.place.scope is not scope:
                continue
            reader = next((r for r in ctx.index.readers_in(scope).get(binding.target, ())
                           if id(r) not in ids and binding.target in _names_read(r)), None)
            if reader is not None:
                return f"binds `{binding.target}`, which `{_first_line(ctx, reader)}` reads on every rank"
    return None


def _names_read(stmt: cst.BaseStatement) -> set[str]:
    """The names a statement itself reads (a compound one in its header): `url = BACKUP` binds
    `url` and reads only `BACKUP`; `x[i] = y` and `n += 1` read their targets too."""
    parts: list[cst.CSTNode] = []
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                parts += [small.value] + [t.target for t in small.targets if not _only_names(t.target)]
            elif isinstance(small, cst.AnnAssign):
                parts += [small.annotation] + ([small.value] if small.value is not None else [])
                parts += [] if _only_names(small.target) else [small.target]
            else:
                parts.append(small)
    elif isinstance(stmt, cst.For):
        parts = [stmt.iter, *([] if _only_names(stmt.target) else [stmt.target])]
    elif isinstance(stmt, (cst.If, cst.While)):
        parts = [stmt.test]
    elif isinstance(stmt, cst.With):
        parts = [item.item for item in stmt.items]
    return {name for part in parts for name in read_names(part)}


def _only_names(target: cst.BaseExpression) -> bool:
    """`url` or `a, (b, c)`: a target that binds names and reads none."""
    if isinstance(target, cst.Name):
        return True
    if isinstance(target, (cst.Tuple, cst.List)):
        return all(_only_names(e.value) for e in target.elements)
    return isinstance(target, cst.StarredElement) and _only_names(target.value)


def _whole_if_then_barrier(ctx: Context, top: cst.If, test: str, comment: str) -> None:
    """`if <test>:` around the whole `if`, then a barrier after it (the guards inside with the same
    test are dropped by the plan)."""
    ctx.plan.guard(top, test)
    ctx.plan.insert_after(top, [_barrier(ctx, comment)])


def _filesystem_if_finding(ctx: Context, top: cst.If, what: str, advice: str) -> None:
    """MIG120 at the `if` whose test reads the filesystem: no barrier could go under it."""
    ctx.report("MIG120", f"{what}; it stands inside `{_first_line(ctx, top)}`, whose test reads the filesystem: a rank "
               "that tests it after rank 0 has written takes the other branch, so a barrier inside it would wait "
               f"forever, and none was added; {advice}", top)


def _conditions(ctx: Context, top: cst.If, stmt: cst.BaseStatement) -> list[str] | None:
    """The tests that lead from `top` down to `stmt`, outermost first (`A` for the body of `if A:`,
    `not A` for its `else:` or `elif`); None where something else stands between (a loop, a
    `with`, a one-line body) or a test calls what need not be read twice (only `os`, `os.path`,
    `pathlib` and a path's own tests are)."""
    chain = ctx.index.enclosing_statements(stmt)
    tests: list[str] = []
    for inner, outer in zip(chain, chain[1:]):
        if not isinstance(outer, cst.If) or not _reads_only_paths(ctx, outer.test) or contains(
                outer.test, lambda n: isinstance(n, cst.Comment)):
            return None
        block = ctx.index.block_of.get(inner, (None, 0))[0]
        if block is outer.body:
            tests.append(_spelled_test(ctx, outer.test, negate=False))
        elif outer.orelse is inner or (isinstance(outer.orelse, cst.Else) and block is outer.orelse.body):
            tests.append(_spelled_test(ctx, outer.test, negate=True))
        else:
            return None
        if outer is top:
            return tests[::-1]
    return None


def _reads_only_paths(ctx: Context, test: cst.BaseExpression) -> bool:
    for call in calls_in(test):
        qualified = ctx.index.qualify(call.func) or ""
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
        if not (qualified.startswith(("os.", "pathlib.", "glob.")) or method in ("exists", "is_file", "is_dir")
                or spell(call.func) in ("len", "str", "bool")):
            return False
    return True


LOOSE = (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.NamedExpr)


def _spelled_test(ctx: Context, test: cst.BaseExpression, negate: bool) -> str:
    """The test on one line, fit to stand after `and` (`not (...)` where it is negated)."""
    if negate and isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negate = test.expression, False
    text = " ".join(ctx.code(test).split())
    loose = isinstance(test, LOOSE) or (negate and isinstance(test, (cst.Comparison, cst.UnaryOperation, cst.BinaryOperation)))
    if loose and not test.lpar:
        text = f"({text})"
    return f"not {text}" if negate else text


# -- directories -------------------------------------------------------------------------------

def _makes_directory(ctx: Context, call: CallSite) -> bool:
    """`os.mkdir(d)`, `os.makedirs(d)`, or a path's `.mkdir(...)` (pathlib: no argument but
    `mode`, `parents`, `exist_ok`)."""
    if call.name in MAKE_DIRS:
        return True
    func = call.node.func
    return (isinstance(func, cst.Attribute) and func.attr.value == "mkdir" and (ctx.index.qualify(func) or "") != "os.mkdir"
            and all(a.keyword is not None and a.keyword.value in PATH_MKDIR_KEYWORDS for a in call.node.args))


def _directory(ctx: Context, call: CallSite) -> None:
    """A directory made on every rank: `exist_ok=True`, so the rank that comes second does not fail
    on it; rank 0 alone, then a barrier, where the script relies on the error (a handler that does
    more than `pass`) or the name is made per run (a time stamp each rank reads on its own)."""
    node, stmt = call.node, call.place.stmt
    is_os = call.name in MAKE_DIRS
    given = argument(node, "exist_ok", 2 if is_os else 99)
    if (given is not None and not _false(given.value)) or (is_os and (argument(node, "dir_fd", 99) is not None or not node.args)):
        return
    try_stmt = _catching_try(ctx, stmt)
    if try_stmt is not None:
        if not _only_passes(try_stmt):
            _on_rank_zero(ctx, try_stmt, "the script handles the error a second rank would get")
        return
    made = _made_per_run(ctx, _directory_named(node, is_os), call.place.scope, 0)
    if made is not None:
        _on_rank_zero(ctx, stmt, f"its name is made on each rank ({made}): ranks could make different folders")
        return
    at = next((i for i, a in enumerate(node.args) if a is given), None)
    ctx.plan.replace(node, _exist_ok_rewrite(ctx, is_os, at))


def _exist_ok_rewrite(ctx: Context, is_os: bool, at: int | None) -> Callable[[cst.CSTNode], cst.CSTNode]:
    """`os.mkdir(d)` / `os.makedirs(d)` -> `os.makedirs(d, exist_ok=True)`; `p.mkdir(...)` ->
    `p.mkdir(..., exist_ok=True)`; an `exist_ok=False` (argument `at`, by name or place) becomes True."""
    true = cst.Name("True")

    def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        args = [a.with_changes(value=true) if i == at else a for i, a in enumerate(updated.args)]
        if at is None:
            if args and isinstance(args[-1].comma, cst.MaybeSentinel):
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(true, keyword=cst.Name("exist_ok"), equal=_equal(updated)))
        func = updated.func
        if is_os:
            func = func.with_changes(attr=cst.Name("makedirs")) if isinstance(func, cst.Attribute) else expression(
                f"{ctx.module_name('os')}.makedirs")
        return updated.with_changes(func=func, args=args)

    return rewrite


def _false(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "False"


def _directory_named(node: cst.Call, is_os: bool) -> cst.CSTNode:
    """The expression that names the directory: `os.mkdir`'s first argument, a path's receiver."""
    if is_os:
        return node.args[0].value
    assert isinstance(node.func, cst.Attribute)
    return node.func.value


def _made_per_run(ctx: Context, node: cst.CSTNode, scope: Scope, depth: int) -> str | None:
    """What makes a name new on each run, when it is made so, directly or through the names it is
    built from in this function: "a time stamp" (`time.strftime(...)`, `datetime.now()`, `uuid4()`),
    or "a number from the folders it lists" (`glob.glob(dir + "/experiment_*")`: a rank that lists
    after another one made its folder takes the next number)."""
    for call in calls_in(node):
        qualified = ctx.index.qualify(call.func) or ""
        if qualified.startswith(PER_RUN):
            return "a time stamp"
        if qualified in LISTINGS or (isinstance(call.func, cst.Attribute) and call.func.attr.value in ("glob", "iterdir")
                                     and not qualified.startswith("glob.")):
            return f"a number from the folders `{ctx.code(call.func)}(...)` lists"
    if depth > 3:
        return None
    for name in read_names(node):
        bindings = ctx.index.bindings_of_in(name, scope) or ctx.index.bindings_of_in(name.split(".")[0], scope)
        for binding in bindings:
            made = _made_per_run(ctx, binding.value, scope, depth + 1) if binding.value is not None else None
            if made is not None:
                return made
    return None


def _on_rank_zero(ctx: Context, stmt: cst.BaseStatement, why: str) -> None:
    """`stmt` on rank 0, then a barrier for the others; a finding where no barrier can be placed
    or the statement does more than make the directory."""
    if runs_on_rank_zero(ctx, stmt):
        return
    top = _filesystem_if(ctx, stmt)
    if top is not None:
        problem = _whole_if_problem(ctx, top)
        if problem is None:
            _whole_if_then_barrier(ctx, top, ctx.rank_zero_test(), "the other ranks wait for the directory rank 0 made")
            return
        _filesystem_if_finding(ctx, top, f"`{_first_line(ctx, stmt)}` makes a directory on every rank, and {why}",
                               f"the whole `if` cannot run on rank 0 alone {problem}: make the directory on rank 0 only, "
                               f"followed by {ctx.distributed.said(ctx.distributed.barrier)} outside that `if`")
        return
    if _only_directories(ctx, stmt) and every_rank_reaches(ctx, stmt):
        ctx.plan.guard(stmt, ctx.rank_zero_test())
        ctx.plan.insert_after(stmt, [_barrier(ctx, "the other ranks wait for the directory rank 0 made")])
        return
    ctx.report("MIG120", f"`{_first_line(ctx, stmt)}` makes a directory on every rank, and {why}: all ranks but one "
               "fail or take another path; make it on rank 0 only, followed by "
               f"{ctx.distributed.said(ctx.distributed.barrier)} where every rank passes", stmt)


def _only_directories(ctx: Context, stmt: cst.BaseStatement | cst.BaseSmallStatement) -> bool:
    """A statement that only makes directories; a `try:` around such statements whose handlers
    only pass, print, log or raise (nothing bound, nothing left early, no collective)."""
    if isinstance(stmt, cst.Try):
        body = stmt.body.body
        return all(_only_directories(ctx, s) for s in body) and all(_plain_handler(ctx, h) for h in stmt.handlers) \
            and stmt.orelse is None and stmt.finalbody is None
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    return all(isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and _makes_directory_call(ctx, small.value)
               for small in stmt.body)


def _plain_handler(ctx: Context, handler: cst.ExceptHandler) -> bool:
    if handler.name is not None:
        return False
    for inner in handler.body.body:
        if not isinstance(inner, cst.SimpleStatementLine):
            return False
        for small in inner.body:
            if isinstance(small, (cst.Pass, cst.Raise)):
                continue
            if not (isinstance(small, cst.Expr) and isinstance(small.value, (cst.Call, cst.Ellipsis))):
                return False
            if isinstance(small.value, cst.Call) and ((ctx.index.qualify(small.value.func) or spell(small.value.func) or "") in EXITS
                                                      or may_be_collective(ctx, small)):
                return False
    return True


def _catching_try(ctx: Context, stmt: cst.BaseStatement) -> cst.Try | None:
    """The `try:` whose body holds `stmt` and that handles OSError/FileExistsError (or broader)."""
    chain = ctx.index.enclosing_statements(stmt)
    for inner, ancestor in zip(chain, chain[1:]):  # `inner` sits right in `ancestor`: in its body, or not
        if isinstance(ancestor, cst.Try) and ctx.index.block_of.get(inner, (None, 0))[0] is ancestor.body:
            for handler in ancestor.handlers:
                if handler.type is None or any(n in OS_ERRORS for n in names_in(handler.type)):
                    return ancestor
    return None


def _only_passes(stmt: cst.Try) -> bool:
    """Every handler only `pass`es: the error a second rank gets changes nothing."""
    return all(all(isinstance(inner, cst.SimpleStatementLine) and all(
        isinstance(small, cst.Pass) or (isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis))
        for small in inner.body) for inner in handler.body.body) for handler in stmt.handlers)


def _equal(call: cst.Call) -> cst.AssignEqual:
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    return next((a.equal for a in call.args if a.keyword is not None and isinstance(a.equal, cst.AssignEqual)), tight)


# -- deleting, moving, copying ---------------------------------------------------------------

def _fs_call(ctx: Context, stmt: cst.BaseStatement) -> str | None:
    """"destroy" / "mkdir" for a statement that only runs such calls (an `if` around them
    included), else None."""
    if isinstance(stmt, cst.SimpleStatementLine):
        kinds = []
        for small in stmt.body:
            if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
                return None
            name = ctx.index.qualify(small.value.func) or ""
            kinds.append("destroy" if name in DESTRUCTIVE else "mkdir" if _makes_directory_call(ctx, small.value) else None)
        if None in kinds:
            return None
        return "destroy" if "destroy" in kinds else "mkdir"
    if isinstance(stmt, cst.If) and isinstance(stmt.body, cst.IndentedBlock) and stmt.orelse is None:
        if calls_in(stmt.test) and not all((ctx.index.qualify(c.func) or "").startswith("os.path.") for c in calls_in(stmt.test)):
            return None
        inner = [_fs_call(ctx, s) for s in stmt.body.body]
        if None in inner:
            return None
        return "destroy" if "destroy" in inner else "mkdir"
    return None


def _destructive_runs(ctx: Context) -> list[list[cst.BaseStatement]]:
    """Runs of neighbouring statements that only delete/move/copy files and make directories,
    holding at least one deletion, move or copy."""
    runs: list[list[cst.BaseStatement]] = []
    seen_blocks: set[int] = set()
    for stmt, (block, _position) in ctx.index.block_of.items():
        if id(block) in seen_blocks:
            continue
        seen_blocks.add(id(block))
        run: list[cst.BaseStatement] = []
        kinds: list[str] = []
        for inner in list(block.body) + [None]:
            kind = _fs_call(ctx, inner) if inner is not None else None
            above: Sequence[cst.EmptyLine] = getattr(inner, "leading_lines", ())
            if run and (kind is None or above):  # a blank line ends a run too
                if "destroy" in kinds:
                    runs.append(run)
                run, kinds = [], []
            if kind is not None:
                assert inner is not None  # the None that ends the block has no kind
                run.append(inner)
                kinds.append(kind)
    inside = {id(node) for run in runs for stmt in run for node in _statements_below(stmt)}
    return [run for run in runs if id(run[0]) not in inside]


def _statements_below(stmt: cst.BaseStatement) -> list[cst.CSTNode]:
    return [n for n in descendants(stmt) if n is not stmt and isinstance(n, cst.BaseStatement)]


def _top_of_run(ctx: Context, stmt: cst.BaseStatement) -> cst.BaseStatement:
    """The statement of its block holding `stmt` that a run would list (the `if` around it)."""
    chain = ctx.index.enclosing_statements(stmt)
    for candidate in chain:
        if _fs_call(ctx, candidate) is None:
            break
        stmt = candidate
    return stmt


def _guard_run(ctx: Context, run: list[cst.BaseStatement]) -> bool:
    """The run on rank 0 (then a barrier when it made directories); False when it cannot be."""
    first, last = run[0], run[-1]
    if not may_guard(ctx, first):
        if not runs_in_process_group(ctx.index, ctx.sites.entry, first):  # else: the script's own rank check
            ctx.report("MIG120", f"`{_first_line(ctx, first)}` deletes, moves or copies files on every rank, before the "
                       "process group exists (or after it is gone): ranks race on the same paths; run it on one "
                       "process (e.g. before launching)", first)
        return False
    for stmt in run:
        ctx.plan.guard(stmt, ctx.rank_zero_test())
    makes_dirs = any(_fs_call(ctx, stmt) == "mkdir" or _makes_dir_inside(ctx, stmt) for stmt in run)
    top = _filesystem_if(ctx, first) if makes_dirs else None
    if top is not None:
        _run_under_filesystem_if(ctx, first, top)
    elif makes_dirs:
        if every_rank_reaches(ctx, last):
            ctx.plan.insert_after(last, [_barrier(ctx, "the other ranks wait for the directories rank 0 made")])
        else:
            ctx.report("MIG120", f"`{_first_line(ctx, first)}` now runs on rank 0 only, under a condition that may differ "
                       "between ranks, so no barrier was added: the other ranks may use these paths before rank 0 has "
                       f"made them; add {ctx.distributed.said(ctx.distributed.barrier)} where every rank passes", first)
    return True


def _run_under_filesystem_if(ctx: Context, first: cst.BaseStatement, top: cst.If) -> None:
    """A run that makes directories inside `if os.path.exists(...)`: the whole `if` on rank 0, then
    the barrier; else the run stays on rank 0 with no barrier, and a finding names the `if`."""
    problem = _whole_if_problem(ctx, top)
    if problem is None:
        _whole_if_then_barrier(ctx, top, ctx.rank_zero_test(), "the other ranks wait for the directories rank 0 made")
        return
    _filesystem_if_finding(ctx, top, f"`{_first_line(ctx, first)}` now runs on rank 0 only and makes directories the "
                           "other ranks may use", f"the whole `if` cannot run on rank 0 alone {problem}: add "
                           f"{ctx.distributed.said(ctx.distributed.barrier)} after that `if`, where every rank passes")


def _makes_dir_inside(ctx: Context, stmt: cst.BaseStatement) -> bool:
    return any(_makes_directory_call(ctx, c) for c in ctx.index.calls_under(stmt))


def _makes_directory_call(ctx: Context, call: cst.Call) -> bool:
    site = ctx.index.call_site(call)
    return site is not None and _makes_directory(ctx, site)


def _first_line(ctx: Context, stmt: cst.BaseStatement) -> str:
    """The statement's first line of code, without the comments above it: `try`, `url = BACKUP`."""
    lines = [line.strip() for line in ctx.code(stmt).splitlines()]
    return next((line for line in lines if line and not line.startswith("#")), "").rstrip(":")


# -- the script's own downloads ------------------------------------------------------------------

def _download_units(ctx: Context) -> set[int]:
    """Each download unit on local rank 0, then a barrier (see download_units.py); the ids of the
    statements the units run, which need no edit of their own. A helper that one of its units
    cannot move is left whole on every rank (none of its writes on rank 0 alone, while its reads of
    them run everywhere), its other units with it, and a finding names the call and why."""
    index = ctx.index
    units: dict[int, list[cst.BaseStatement]] = {}
    for site in download_sites(index):
        unit = unit_of(index, site.place.stmt)
        units.setdefault(id(unit[0]), unit)
    runs = {key: what_runs(index, unit) for key, unit in units.items()}
    problems = {key: _unit_problem(ctx, unit, runs[key][0]) for key, unit in units.items()}
    refused = {key: unit for key, unit in units.items() if problems[key]}
    blocked = {id(scope): scope for key in refused for scope in runs[key][1]}
    covered = _leave_whole(ctx, list(blocked.values()))
    for key, unit in units.items():
        problem, (inside, helpers) = problems[key], runs[key]
        if _prefetched_dataset(ctx, unit[0]):
            problem = ""  # runs where the dataset's own download does: on the prefetching process alone
        if problem:
            _refused_unit_finding(ctx, unit[0], problem, helpers)
            continue
        held = next((scope for scope in helpers if id(scope) in blocked), None)
        if held is not None:
            _held_unit_finding(ctx, unit[0], held, refused, runs)
            continue
        own = {id(stmt) for stmt in unit}
        covered |= {id(stmt) for stmt in inside}
        for stmt in inside:  # a write another step put on rank 0: the unit already runs on one process
            if id(stmt) not in own and ctx.plan.guarded.get(stmt) == ctx.rank_zero_test():
                del ctx.plan.guarded[stmt]
        if problem is None:
            _unit_on_local_rank_zero(ctx, unit)
    return covered


def _leave_whole(ctx: Context, helpers: list[Scope]) -> set[int]:
    """The helpers as the script wrote them, on every rank: the rank-0 guards another step put on
    their writes are dropped (a write on rank 0 alone, read back on every rank at once, is worse
    than the same write on every rank); only their messages stay on rank 0. The ids of their
    statements, which no later edit touches."""
    covered: set[int] = set()
    for scope in helpers:
        assert isinstance(scope.node, cst.FunctionDef)  # download helpers and file functions: never the module
        inside, _nested = what_runs(ctx.index, [scope.node])
        covered |= {id(stmt) for stmt in inside}
        for stmt in inside:
            if ctx.plan.guarded.get(stmt) == ctx.rank_zero_test() and not _only_messages(ctx, stmt):
                del ctx.plan.guarded[stmt]
    return covered


def _only_messages(ctx: Context, stmt: cst.BaseStatement) -> bool:
    """`print(...)` or a logging call standing alone."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
            return False
        func = small.value.func
        name = ctx.index.qualify(func) or spell(func) or ""
        if not (name == "print" or name.startswith("logging.")
                or (isinstance(func, cst.Attribute) and func.attr.value in ("debug", "info", "warning", "warn"))):
            return False
    return True


def _helper_names(helpers: list[Scope]) -> str:
    names = ", ".join(f"`{scope.name}`" for scope in helpers)
    return f"{names} {'are' if len(helpers) > 1 else 'is'}"


def _refused_unit_finding(ctx: Context, first: cst.BaseStatement, problem: str, helpers: list[Scope]) -> None:
    kept = (f"; so {_helper_names(helpers)} left whole on every rank, as the script wrote it (no write on rank 0 "
            "alone while every rank reads it), and every rank downloads") if helpers else ""
    ctx.report("MIG120", f"`{_first_line(ctx, first)}` downloads on every rank at once, {problem}{kept}: download the "
               "data once before launching, or let one rank per node download while the others wait in "
               f"{ctx.distributed.said(ctx.distributed.barrier)}", first)


def _held_unit_finding(ctx: Context, first: cst.BaseStatement, helper: Scope, refused: dict[int, list[cst.BaseStatement]],
                       runs: dict[int, tuple[list[cst.BaseStatement], list[Scope]]]) -> None:
    """A unit that could move, left on every rank because another call of its helper cannot."""
    other = next(unit[0] for key, unit in refused.items() if any(scope is helper for scope in runs[key][1]))
    where = f" (line {ctx.position(other)[0]})"
    ctx.report("MIG120", f"`{_first_line(ctx, first)}` downloads on every rank at once: `{helper.name}` is also called "
               f"in `{_first_line(ctx, other)}`{where}, which cannot run on one process, so `{helper.name}` is left "
               "whole on every rank here too; download the data once before launching, or let one rank per node "
               f"download while the others wait in {ctx.distributed.said(ctx.distributed.barrier)}", first)


def _unit_problem(ctx: Context, unit: list[cst.BaseStatement], inside: list[cst.BaseStatement]) -> str | None:
    """Why the unit cannot run on one process per node (words for the finding); "" when it
    already runs on rank 0 (the script's own check, or a step's guard); None when it can."""
    first = unit[0]
    if any(runs_on_rank_zero(ctx, stmt) for stmt in unit):
        return ""
    if not every_rank_reaches(ctx, first):
        return ("where no barrier can be placed (before setup, under a condition that may differ per rank, or in code "
                "some ranks never reach)")
    collective = next((stmt for stmt in unit if may_be_collective(ctx, stmt)), None)
    if collective is not None:
        return f"and `{_first_line(ctx, collective)}` may need every rank, so it cannot move to one"
    bound = _bound_and_read_elsewhere(ctx, first, inside)
    return f"and {bound}" if bound is not None else None


def _prefetched_dataset(ctx: Context, first: cst.BaseStatement) -> bool:
    """Whether the unit downloads under `if download:`, `download` a parameter of its function (a
    dataset class's __init__) that every caller passes by keyword (`VOCSegmentation(root,
    download=opts.download)`): those calls are the dataset downloads this step makes on the first
    process of each node, every other rank passing download=False (`_downloads`)."""
    index = ctx.index
    scope = index.scope_of.get(first)
    if scope is None or "download" not in scope.params:
        return False
    tested = any(isinstance(around, cst.If) and isinstance(around.test, cst.Name) and around.test.value == "download"
                 for around in index.enclosing_statements(first)[1:])
    calls = callers(index, scope)
    return tested and bool(calls) and all(
        (arg := argument(call.node, "download", 99)) is not None and arg.keyword is not None for call in calls)


def _unit_on_local_rank_zero(ctx: Context, unit: list[cst.BaseStatement]) -> None:
    """`if local_rank == 0:` around the unit's statements, then a barrier every rank reaches."""
    scope = ctx.index.scope_of.get(unit[0])
    local_rank = ctx.local_rank(scope) if scope is not None else ctx.distributed.local_rank_name
    for stmt in unit:
        ctx.plan.guard(stmt, f"{local_rank} == 0")
    ctx.plan.insert_after(unit[-1], [_barrier(ctx, "one download per node; the other ranks wait for its files")])


# -- dataset downloads -----------------------------------------------------------------------------

def _always_false(ctx: Context, name: str) -> bool:
    """`DOWNLOAD = False` and never bound to anything else in the file: nothing is downloaded."""
    bindings = ctx.index.bindings_of(name)
    return bool(bindings) and all(isinstance(b.value, cst.Name) and b.value.value in ("False", "None") for b in bindings)


def _downloads(ctx: Context, units: set[int]) -> None:
    by_statement: dict[cst.BaseStatement, list[cst.Call]] = {}
    deferred: list[tuple[CallSite, cst.Lambda]] = []
    for call in ctx.index.calls:
        download = argument(call.node, "download", 99)
        if download is None or download.keyword is None or id(call.place.stmt) in units:
            continue
        if isinstance(download.value, cst.Name) and (download.value.value in ("False", "None")
                                                     or _always_false(ctx, download.value.value)):
            continue
        if call.name in ctx.index.functions:
            continue
        holder = _lambda_around(call)
        if holder is not None:  # runs where the lambda is called, if it is
            deferred.append((call, holder))
            continue
        by_statement.setdefault(call.place.stmt, []).append(call.node)
    _lambda_downloads(ctx, deferred)
    groups: list[list[tuple[cst.BaseStatement, list[cst.Call]]]] = []
    for stmt, calls in by_statement.items():
        if groups and _follows(ctx, groups[-1], stmt, calls):
            groups[-1].append((stmt, calls))
        else:
            groups.append([(stmt, calls)])
    for group in groups:
        _download_group(ctx, group[0][0], [call for _stmt, found in group for call in found])


def _download_group(ctx: Context, first: cst.BaseStatement, calls: list[cst.Call]) -> None:
    """`if local_rank == 0: <the downloads>` then a barrier, before `first`; under a test of the
    filesystem, before the outermost such `if`, with the tests that lead to `first` added to the
    rank's (`if local_rank == 0 and not os.path.exists(root):`)."""
    code = ctx.code(calls[0]).strip().splitlines()[0]
    top = _filesystem_if(ctx, first)
    if not every_rank_reaches(ctx, top or first):
        ctx.report("MIG120", f"`{code}` downloads on every rank at once and runs where no barrier can be placed "
                   "(before setup, under a condition that may differ per rank, or in code some ranks never reach): download the data once before "
                   f"launching, or let one rank per node download while the others wait in {ctx.distributed.said(ctx.distributed.barrier)}", calls[0])
        return
    conditions = _conditions(ctx, top, first) if top is not None else []
    if top is not None and (conditions is None or _reads_what_the_if_binds(ctx, top, first, calls)):
        _filesystem_if_finding(ctx, top, f"`{code}` downloads on every rank at once",
                               "its download could not be moved above that `if` (it reads a name bound inside it, or "
                               "something other than a test of the filesystem leads to it): download the data once "
                               "before launching, or let one rank per node download before that `if` while the others "
                               f"wait in {ctx.distributed.said(ctx.distributed.barrier)}")
        return
    scope = ctx.index.scope_of.get(first)
    local_rank = ctx.local_rank(scope) if scope is not None else ctx.distributed.local_rank_name
    test = " and ".join([f"{local_rank} == 0", *(conditions or [])])
    lines = [f"if {test}:  # one download per node; the other ranks wait, then read the files"]
    downloads = [_download_only(ctx, call) for call in calls]
    if None in downloads:
        return
    lines += [f"    {download}" for download in downloads]
    lines.append(ctx.barrier())
    new = statements("\n".join(lines) + "\n")
    for call in calls:  # after the barrier the files are there: every rank reads them, none fetches or unpacks again
        _no_download(ctx, call)
    # ahead of a dataset the sampler step hoisted out of this statement: that one reads the files
    ctx.plan.insert_before(top or first, new, ahead_of=ctx.hoisted_datasets)


def _no_download(ctx: Context, call: cst.Call) -> None:
    """`Dataset(root, download=<anything>)` after the barrier -> `download=False`: a class that
    unpacks its archive whenever asked to download (torchvision's VOCSegmentation, a project's own)
    would unpack it again on every rank, over the files other ranks are reading."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "download" and not (
                isinstance(arg.value, cst.Name) and arg.value.value == "False"):
            ctx.plan.replace(arg, with_fields(value=cst.Name("False")))


# -- dataset downloads in lambdas: `{"a": lambda: A(root, download=True), ...}[name]()` ------------

def _lambda_around(call: CallSite) -> cst.Lambda | None:
    """The lambda that holds the call where it is bound to a name (`make = lambda: ...`) or is one
    of the values of a dict, list or tuple (a table to choose from): its body runs where it is
    called, and only if it is chosen. A lambda handed straight to a call is not one of these (its
    download moves up as if it were written there)."""
    stmt = call.place.stmt
    holders = {id(node.value) for node in descendants(stmt) if isinstance(node, (cst.DictElement, cst.Element))}
    for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
            holders.add(id(small.value))
    return next((node for node in descendants(stmt) if isinstance(node, cst.Lambda) and id(node) in holders
                 and contains(node.body, lambda n: n is call.node)), None)


def _lambda_downloads(ctx: Context, deferred: list[tuple[CallSite, cst.Lambda]]) -> None:
    """A download in a lambda runs where the lambda is called, and only if it is: one chosen from a
    table (`valid = {"a": lambda: A(root, download=True), "b": lambda: B(...)}`, `fn = valid[name]`,
    `return fn()`) downloads one dataset, not all. So the call that runs it is made first on the
    first process of each node, then a barrier, then the script's own call builds it on every rank
    from the files (`if local_rank == 0: fn()`, barrier, `return fn()`). Where that call cannot be
    found, or no barrier can be placed before it, the downloads are left as they are and MIG120
    says so."""
    placed: set[int] = set()
    for call, holder in deferred:
        invocations, problem = _lambda_invocations(ctx, call, holder)
        code = ctx.code(call.node).strip().splitlines()[0]
        wait = f"let one rank per node download while the others wait in {ctx.distributed.said(ctx.distributed.barrier)}"
        if problem is None and not invocations:
            problem = "and no call of that lambda was found"
        for invocation in invocations if problem is None else []:
            stmt = invocation.place.stmt
            if any(calls_in(arg.value) for arg in invocation.node.args):
                problem = f"and its call `{ctx.code(invocation.node)}` computes its arguments (they would run twice)"
            elif _filesystem_if(ctx, stmt) is not None or not every_rank_reaches(ctx, stmt):
                problem = (f"and its call `{ctx.code(invocation.node)}` (line {ctx.position(invocation.node)[0]}) runs "
                           "where no barrier can be placed (before setup, under a condition that may differ per rank, "
                           "or in code some ranks never reach)")
            if problem is not None:
                break
        if problem is not None:
            ctx.report("MIG120", f"`{code}` downloads on every rank at once: it stands in a lambda, which downloads where "
                       f"it is called, {problem}; nothing was changed here: download the data once before launching, or "
                       f"{wait}", call.node)
            continue
        for invocation in invocations:
            if id(invocation.node) in placed:
                continue
            placed.add(id(invocation.node))
            stmt = invocation.place.stmt
            local_rank = ctx.local_rank(invocation.place.scope)
            chosen = " ".join(ctx.code(invocation.node).split())
            lines = [f"if {local_rank} == 0:  # one download per node, of the dataset chosen here; the other ranks wait",
                     f"    {chosen}", ctx.barrier()]
            ctx.plan.insert_before(stmt, statements("\n".join(lines) + "\n"), ahead_of=ctx.hoisted_datasets)


def _lambda_invocations(ctx: Context, call: CallSite, holder: cst.Lambda) -> tuple[list[CallSite], str | None]:
    """The calls that run `holder`, in the scope that binds it: `make()` for `make = lambda: ...`;
    `table[key]()`, `table.get(key)()`, or `fn()` after `fn = table[key]` for a lambda among the
    values of `table = {...}` (a dict, list or tuple). With words for the finding where the lambda
    or the table goes anywhere else (handed on, returned, kept in an attribute)."""
    index = ctx.index
    stmt, scope = call.place.stmt, call.place.scope
    binding = next((b for b in index.bindings_at(stmt) if b.value is not None and b.place.scope is scope
                    and (b.value is holder or _holds_value(b.value, holder))), None)
    if binding is None or "." in binding.target:
        return [], "and it is not bound to a name of its function (alone, or in a dict, list or tuple)"
    direct = binding.value is holder
    names = {binding.target}
    if not direct:
        picked = {b.target for b in index.bindings_in(scope)
                  if "." not in b.target and b.value is not None and _picks_from(b.value, binding.target)}
        names |= {name for name in picked if all(b.value is not None and _picks_from(b.value, binding.target)
                                                 for b in index.bindings_of_in(name, scope))}
    found: list[CallSite] = []
    for site in index.calls_from(scope):
        func = site.node.func
        if spell(func) in names or not direct and _picks_from(func, binding.target):
            found.append(site)
    called = {id(site.node.func) for site in found}
    for name in names:
        for reader in index.readers_in(scope).get(name, ()):
            stray = next((n for n in descendants(reader) if isinstance(n, cst.Name) and n.value == name
                          and not _within_call_or_pick(reader, n, called, binding.target)), None)
            if stray is not None and reader is not stmt:
                return [], f"and `{_first_line(ctx, reader)}` hands `{name}` on"
    return found, None


def _holds_value(node: cst.BaseExpression, holder: cst.Lambda) -> bool:
    """`{key: holder, ...}`, `[holder, ...]`, `(holder, ...)`: the lambda is one of the values."""
    if isinstance(node, cst.Dict):
        return any(isinstance(e, cst.DictElement) and e.value is holder for e in node.elements)
    if isinstance(node, (cst.List, cst.Tuple)):
        return any(isinstance(e, cst.Element) and e.value is holder for e in node.elements)
    return False


def _picks_from(node: cst.BaseExpression, table: str) -> bool:
    """`table[key]` or `table.get(key...)`."""
    if isinstance(node, cst.Subscript):
        return spell(node.value) == table
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get"
            and spell(node.func.value) == table)


def _within_call_or_pick(stmt: cst.BaseStatement, name: cst.Name, called: set[int], table: str) -> bool:
    """Whether this read of a name is a call's callee (`fn()`), part of one (`table[key]()`), or a
    pick bound to a name (`fn = table[key]`)."""
    if any(id(node) in called and contains(node, lambda n: n is name) for node in descendants(stmt)):
        return True
    if any(isinstance(node, cst.AssignTarget) and node.target is name for node in descendants(stmt)):
        return True  # `fn = table[key]` binds the name
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Assign) and _picks_from(small.value, table) and contains(small.value, lambda n: n is name)
        for small in stmt.body)


def _reads_what_the_if_binds(ctx: Context, top: cst.If, first: cst.BaseStatement, calls: list[cst.Call]) -> bool:
    """Whether the downloads, or the tests of the `if`s inside `top` that lead to them, read a
    name bound inside `top`: they are to run before it."""
    chain = ctx.index.enclosing_statements(first)
    tests = [outer.test for outer in chain[1:chain.index(top)] if isinstance(outer, cst.If)]
    inside = [s for s in _statements_below(top) if isinstance(s, cst.BaseStatement)]
    bound = {b.target.split(".")[0] for stmt in inside for b in ctx.index.bindings_at(stmt)}
    return any({name.split(".")[0] for name in names_in(node)} & bound for node in [*calls, *tests])


def _follows(ctx: Context, group: list[tuple[cst.BaseStatement, list[cst.Call]]], stmt: cst.BaseStatement, calls: list[cst.Call]) -> bool:
    """`stmt` comes right after the group's last statement in one block, and its downloads read
    nothing those statements bind: its download can move up with theirs."""
    index = ctx.index
    last = group[-1][0]
    if last not in index.block_of or stmt not in index.block_of:
        return False
    (block, position), (other, next_position) = index.block_of[last], index.block_of[stmt]
    if block is not other or next_position != position + 1:
        return False
    bound = {b.target for earlier, _calls in group for b in index.bindings_at(earlier)}
    return not any(set(names_in(call)) & bound for call in calls)


def _download_only(ctx: Context, call: cst.Call) -> str | None:
    """The constructor call without its transforms: all it has to do here is fetch the files.
    None when an argument cannot be put on one line (a comment inside it)."""
    parts: list[str] = []
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in TRANSFORM_KEYWORDS:
            continue
        value = ctx.code(arg.value)
        if "#" in value and contains(arg.value, lambda n: isinstance(n, cst.Comment)):
            return None
        head = f"{arg.keyword.value}=" if arg.keyword is not None else str(arg.star)
        parts.append(head + " ".join(value.split()))
    return f"{ctx.code(call.func)}({', '.join(parts)})"


# -- files opened for writing, then written and closed ------------------------------------------

def _opened_for_writing(ctx: Context, value: cst.BaseExpression | None) -> bool:
    """`open(p, "w")`, `gzip.open(p, "wb")`, any opener given a mode that writes (not "r+")."""
    if not isinstance(value, cst.Call):
        return False
    mode = opener_mode(ctx.index, value)
    return mode is not None and writes_in_mode(mode) and "r+" not in mode


def _file_handles(ctx: Context, units: set[int]) -> None:
    """`f = open(p, "w")`, `f.write(...)`, `f.close()`: the open and every use of the handle on
    rank 0 (the handle then exists on rank 0 only, and is only used there)."""
    index = ctx.index
    opened: dict[tuple[str, int], list[cst.BaseStatement]] = {}
    for binding in index.bindings:
        stmt = binding.place.stmt
        if _opened_for_writing(ctx, binding.value) and isinstance(stmt, cst.SimpleStatementLine) and id(stmt) not in units:
            opened.setdefault((binding.target, id(binding.place.scope)), []).append(stmt)
    for (name, _scope), opens in opened.items():
        scope = index.scope_of[opens[0]]
        if not all(may_guard(ctx, stmt) for stmt in opens):
            continue
        rebound = any(b.place.stmt not in opens for b in index.bindings_of_in(name, scope))
        uses = _uses(ctx, name, scope, opens)
        other = next((u for u in uses if not _handle_call(index, u, name) or may_be_collective(ctx, u)), None)
        if other is not None or rebound:
            shown = _first_line(ctx, other) if other is not None else f"another `{name} = ...`"
            ctx.report("MIG120", f"`{_first_line(ctx, opens[0])}` opens a file for writing on every rank, and `{name}` is "
                       f"also used in `{shown}`: every rank writes the same file; open it and write it on rank 0 only",
                       opens[0])
            continue
        for guarded in [*opens, *uses]:
            ctx.plan.guard(guarded, ctx.rank_zero_test())


def _uses(ctx: Context, name: str, scope: Scope, opens: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """The statements of `scope` that read `name`: simple statements, or the compound statement
    whose own header (test, iterable, items) reads it."""
    return [stmt for stmt in ctx.index.readers_in(scope).get(name, ()) if stmt not in opens]


def _handle_call(index: ScriptIndex, stmt: cst.BaseStatement, name: str) -> bool:
    """`f.write(...)` / `f.close()` standing alone, or `print(..., file=f)`."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return False
    call = stmt.body[0].value
    if not isinstance(call, cst.Call):
        return False
    if isinstance(call.func, cst.Attribute) and spell(call.func.value) == name and call.func.attr.value in HANDLE_METHODS:
        return True
    if spell(call.func) == "print":
        return any(a.keyword is not None and a.keyword.value == "file" for a in call.args)
    return (index.qualify(call.func) or "") in SAVES  # json.dump(obj, f), pickle.dump(obj, f), torch.save(obj, f)


# -- saved on rank 0, loaded by every rank ---------------------------------------------------------

def _load_after_save(ctx: Context) -> None:
    index = ctx.index
    saved: dict[str, list[CallSite]] = {}
    for call in index.calls:
        keyword = WRITES_TO.get(call.name or "")
        target = argument(call.node, keyword, 1) if keyword is not None else _table_written(index, call)
        if target is not None and runs_on_rank_zero(ctx, call.place.stmt):
            saved.setdefault(_file_key(ctx, target.value, call.place.stmt)[0], []).append(call)
    done: set[int] = set()
    waited: set[int] = set()  # the `if`s of the filesystem a barrier already goes above
    barriers: list[cst.BaseStatement] = []  # the loads a barrier goes above
    order = {stmt: i for i, stmt in enumerate(index.scope_of)}
    for call, source in sorted(_reads_of_saved(ctx, saved), key=lambda read: order.get(read[0].place.stmt, 0)):
        key, stmt = _file_key(ctx, source.value, call.place.stmt) if source is not None else ("", call.place.stmt)
        if source is None or key not in saved:
            continue
        save = _save_read_by(saved[key], call)
        if id(stmt) in done or order.get(stmt, 0) < order.get(save.place.stmt, 0):
            continue
        done.add(id(stmt))
        if _rest_on_rank_zero(ctx, save.place.stmt, stmt):
            continue
        top = _filesystem_if(ctx, stmt) if not runs_on_rank_zero(ctx, stmt) else None
        if top is not None:
            _load_under_filesystem_if(ctx, call.node, save.place.stmt, top, key, waited)
        elif every_rank_reaches(ctx, stmt) and not runs_on_rank_zero(ctx, stmt):
            if any(index.scope_of.get(b) is index.scope_of.get(stmt) and order.get(save.place.stmt, 0) < order.get(b, 0)
                   <= order.get(stmt, 0) for b in barriers):
                continue  # a barrier placed for an earlier load already follows this save
            barriers.append(stmt)
            ctx.plan.insert_above(stmt, _barrier(ctx, f"rank 0 has finished writing {key}"))
        elif not runs_on_rank_zero(ctx, stmt):
            ctx.report("MIG120", f"`{ctx.code(call.node)}` reads a file only rank 0 writes, under a condition that may "
                       "differ between ranks, so no barrier was added: a rank may read it before rank 0 has written it; "
                       f"add {ctx.distributed.said(ctx.distributed.barrier)} where every rank passes before it", call.node)


def _save_read_by(saves: list[CallSite], load: CallSite) -> CallSite:
    """Of the saves that spell the load's file alike, the one of the load's own function, else the
    first: `fn` in `model_save(fn)` and a module's own `fn` are spelled alike but are two names."""
    return next((save for save in saves if save.place.scope is load.place.scope), saves[0])


def _table_written(index: ScriptIndex, call: CallSite) -> cst.Arg | None:
    """The file `df.to_csv("train.csv")` writes (a table of the script, not a module's function)."""
    func = call.node.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in TABLE_WRITES:
        return None
    owner = spell(func.value)
    return table_file(call.node) if owner is not None and owner.split(".")[0] not in index.imports else None


def _reads_of_saved(ctx: Context, saved: dict[str, list[CallSite]]) -> list[tuple[CallSite, cst.Arg | None]]:
    """The loads of files rank 0 saved: `torch.load(f)`, and any other call handed the very file
    name a save wrote (`SpamDataset(csv_file="train.csv")` after `df.to_csv("train.csv")`)."""
    index = ctx.index
    found: list[tuple[CallSite, cst.Arg | None]] = [(call, argument(call.node, "f", 0)) for call in index.calls_named("torch.load")]
    named = {key for key in saved if key[:1] in "\"'"}  # file names written out: the same text means the same file
    saves = {id(call.node) for calls in saved.values() for call in calls}
    for call in index.calls:
        if id(call.node) in saves or call.name == "torch.load":
            continue
        handed = next((arg for arg in call.node.args if _normalized(ctx, arg.value) in named), None)
        if handed is not None:
            found.append((call, handed))
    return found


def _load_under_filesystem_if(ctx: Context, load: cst.Call, save: cst.BaseStatement, top: cst.If, key: str,
                              waited: set[int]) -> None:
    """A load inside `if os.path.exists(...)`: the barrier goes above that `if`, so every rank tests
    the file once rank 0 has written it. Where rank 0 writes it inside that same `if`, no barrier can
    order them (the ranks that test after the write skip the block): a finding names the `if`."""
    if save in _statements_below(top) or not every_rank_reaches(ctx, top):
        _filesystem_if_finding(ctx, top, f"`{ctx.code(load)}` reads a file only rank 0 writes",
                               "test the file once on every rank before rank 0 writes it (`missing = not "
                               f"os.path.exists(path)`, then {ctx.distributed.said(ctx.distributed.barrier)}, then "
                               f"`if missing:`), and add {ctx.distributed.said(ctx.distributed.barrier)} between the "
                               "write and the read")
        return
    if id(top) not in waited:
        waited.add(id(top))
        ctx.plan.insert_above(top, _barrier(ctx, f"rank 0 has finished writing {key}"))


def _rest_on_rank_zero(ctx: Context, save: cst.BaseStatement, load: cst.BaseStatement) -> bool:
    """A file saved after teardown (rank 0 only) and loaded again further down the same block: no
    barrier can order them any more, so the load and the rest of the block run on rank 0 too
    (after teardown every rank has only its own work left, which rank 0 does as the single
    process did). False where that does not hold."""
    index = ctx.index
    if not (after_teardown(ctx, save) and after_teardown(ctx, load)):
        return False
    located = index.block_of.get(save)
    holder = next((s for s in index.enclosing_statements(load) if index.block_of.get(s, (None,))[0] is (located or (None,))[0]), None)
    if located is None or holder is None or index.block_of[holder][1] <= located[1]:
        return False
    block = located[0]
    for later in block.body[index.block_of[holder][1]:]:
        if not runs_on_rank_zero(ctx, later):
            ctx.plan.guard(later, launcher_rank_zero_test(ctx, later))
    return True


def _file_key(ctx: Context, node: cst.BaseExpression, stmt: cst.BaseStatement) -> tuple[str, cst.BaseStatement]:
    """The file a save or load names, and the statement a barrier before the load goes above: for
    a handle of an enclosing `with open(path, ...) as f:` (or another opener: `gzip.open(path)`),
    that `path` and the `with` (the file is opened there, so the barrier must come before it), else
    the expression itself and `stmt`."""
    if isinstance(node, cst.Name):
        for around in ctx.index.enclosing_statements(stmt):
            if not isinstance(around, cst.With):
                continue
            for item in around.items:
                opened = item.item
                if (item.asname is not None and spell(item.asname.name) == node.value and isinstance(opened, cst.Call)
                        and opener_mode(ctx.index, opened) is not None and opened.args):
                    return _normalized(ctx, opened.args[0].value), around
    return _normalized(ctx, node), stmt


def _normalized(ctx: Context, node: cst.BaseExpression) -> str:
    return " ".join(ctx.code(node).split())
