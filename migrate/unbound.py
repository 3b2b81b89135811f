"""Names a rewrite reads before they are bound: `os.environ` at line 6 when `import os` runs at line 12.

`introduced_unbound_names(old, new)` compares the two versions of a file and returns only what the
rewrite introduced: a name the original already read before binding it (a loop-carried variable,
a name bound by `exec`) is the script's own business.

The analysis is deliberately simple and conservative, on the stdlib `ast`:

* Module level: statements run in order; a name is bound once any statement at module level has
  bound it (imports, assignments, def/class, `for` targets, `with ... as`, `except ... as`,
  anywhere inside `if`/`try`/`with`/`for` blocks at module level), whether or not that branch
  runs. Function bodies do not run there: only their decorators and defaults are read.
* Function bodies: the function's own locals are checked in order (a name the body binds anywhere
  is local for the whole body: reading it before the first binding is an UnboundLocalError).
  Other names are resolved when the body runs, which this analysis does not follow: one counts
  only when nothing binds it anywhere (not the function, not one around it, not the module).
* Builtins and module dunders are always bound. A star-import binds everything after it; a
  `global x` in a function binds `x` from the function's definition on.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

ALWAYS_BOUND = frozenset(dir(builtins)) | {
    "__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__", "__cached__",
    "__annotations__", "__path__", "__dict__", "__module__", "__qualname__", "__class__",
}
Read = tuple[str, str, int, int]  # scope, name, line, col (1-based)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
               ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def introduced_unbound_names(old: str, new: str) -> list[tuple[str, int, int]]:
    """(name, line, col) in `new` for each name read before it is bound, unless `old` already read
    that name before binding it in the same scope. Empty when either text does not parse."""
    try:
        after = unbound_reads(ast.parse(new))
        if not after:  # the usual case: the original need not be read at all
            return []
        before = unbound_reads(ast.parse(old))
    except (SyntaxError, ValueError, RecursionError):
        return []
    known = {(scope, name) for scope, name, _line, _col in before}
    return [(name, line, col) for scope, name, line, col in after if (scope, name) not in known]


def unbound_reads(tree: ast.Module) -> list[Read]:
    """Every read of a name before its binding: at module level; in functions, of the function's
    own locals, and of globals that nothing in the file binds at all."""
    functions = list(_functions(tree.body, "", frozenset()))
    declared = {id(f.node): f.declares_global for f in functions}
    module = _Walker("<module>", bound=set(ALWAYS_BOUND), checked=None, declared=declared)
    module.block(tree.body)
    found = list(module.found)
    globals_: frozenset[str] | None = None
    if not module.everything:  # after a star-import any global may exist
        globals_ = frozenset(module.bound).union(*declared.values())
    for function in functions:
        found.extend(_function_reads(function, globals_))
    return found


@dataclass
class _Walker:
    """Runs statements in order, recording reads of `checked` names (None: all) not yet bound."""

    scope: str
    bound: set[str]
    checked: set[str] | None
    known: tuple[frozenset[str], ...] | None = None  # in a function: the sets of names that exist somewhere (None: unknown)
    declared: dict[int, frozenset[str]] = field(default_factory=dict)  # id of a def -> its `global` names
    found: list[Read] = field(default_factory=list)
    everything: bool = False  # after a star-import

    # -- statements -------------------------------------------------------------------------
    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.If, ast.While)):
            self.read(stmt.test)
            self.block(stmt.body)
            self.block(stmt.orelse)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.read(stmt.iter)
            self.bind_target(stmt.target)
            self.block(stmt.body)
            self.block(stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.read(item.context_expr)
                if item.optional_vars is not None:
                    self.bind_target(item.optional_vars)
            self.block(stmt.body)
        elif isinstance(stmt, _TRY):
            self.try_statement(stmt)
        elif isinstance(stmt, _FUNCTIONS):
            self.function(stmt)
        elif isinstance(stmt, ast.ClassDef):
            self.class_definition(stmt)
        elif isinstance(stmt, ast.Match):
            self.match_statement(stmt)
        else:
            self.simple(stmt)

    def try_statement(self, stmt: ast.Try | ast.TryStar) -> None:
        self.block(stmt.body)
        for handler in stmt.handlers:
            if handler.type is not None:
                self.read(handler.type)
            if handler.name:
                self.bound.add(handler.name)
            self.block(handler.body)
        self.block(stmt.orelse)
        self.block(stmt.finalbody)

    def function(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expression in [*stmt.decorator_list, *stmt.args.defaults, *stmt.args.kw_defaults]:
            if expression is not None:
                self.read(expression)
        self.bound.add(stmt.name)
        if self.checked is None:  # `global x` in a function binds x once it can run
            self.bound.update(self.declared.get(id(stmt), ()))

    def class_definition(self, stmt: ast.ClassDef) -> None:
        for expression in [*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)]:
            self.read(expression)
        body = _Walker(self.scope, bound=set(self.bound), checked=self.checked, known=self.known,
                       declared=self.declared, everything=self.everything)
        body.block([s for s in stmt.body if not isinstance(s, _FUNCTIONS)])
        self.found.extend(body.found)
        for method in (s for s in stmt.body if isinstance(s, _FUNCTIONS)):
            body.function(method)
        self.bound.add(stmt.name)

    def match_statement(self, stmt: ast.Match) -> None:
        self.read(stmt.subject)
        for case in stmt.cases:
            self.read_nodes(list(ast.walk(case.pattern)))
            self.bound |= bound_names(case.pattern)
            if case.guard is not None:
                self.read(case.guard)
            self.block(case.body)

    def simple(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            self.bound.update(stmt.names)
            return
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports(stmt)
            return
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            self.note(stmt.target.id, stmt.target)
        if isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.read(stmt.value)
                self.bind_target(stmt.target)
            return
        nodes = list(_executed(stmt))  # one pass: what it reads, then what it binds
        self.read_nodes(nodes)
        self.bound.update(n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))

    def imports(self, stmt: ast.Import | ast.ImportFrom) -> None:
        for alias in stmt.names:
            if alias.name == "*":
                self.everything = True
            elif alias.asname:
                self.bound.add(alias.asname)
            else:
                self.bound.add(alias.name.split(".")[0])

    # -- expressions ------------------------------------------------------------------------
    def read(self, node: ast.AST) -> None:
        """Check every name `node` reads, in order (comprehension variables are their own; `x := ...`
        binds x from there on)."""
        self.read_nodes(list(_executed(node)))

    def read_nodes(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.note(node.id, node)
            elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                self.bound.add(node.target.id)

    def note(self, name: str, node: ast.AST) -> None:
        """A read of `name`: recorded when it is not bound yet (a name `checked` does not hold, a
        global in a function, only when nothing binds it anywhere)."""
        if self.everything or name in self.bound:
            return
        if self.checked is not None and name not in self.checked and (self.known is None or any(name in names for names in self.known)):
            return
        self.found.append((self.scope, name, getattr(node, "lineno", 0), getattr(node, "col_offset", -1) + 1))

    def bind_target(self, node: ast.AST) -> None:
        self.bound.update(bound_names(node))


_TRY = (ast.Try, ast.TryStar)


def bound_names(node: ast.AST) -> set[str]:
    """Names a statement (or a target) binds in its own scope, not counting nested scopes."""
    found: set[str] = set()
    for inner in _walk_here(node):
        found.update(_binds(inner))
    return found


def module_level_names(text: str) -> set[str]:
    """The names a file binds at module level by name (bound_names of each top-level statement: inside
    module-level `if`/`try`/`with`/`for` blocks too), not through a star import; none when it does
    not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    return set().union(*(bound_names(stmt) for stmt in tree.body))


def _binds(node: ast.AST) -> tuple[str, ...]:
    """The names this one node binds (`x` of `x = ...`, `os` of `import os`, `f` of `def f`)."""
    if isinstance(node, ast.Name):
        return (node.id,) if isinstance(node.ctx, (ast.Store, ast.Del)) else ()
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return tuple((a.asname or a.name.split(".")[0]) for a in node.names if a.name != "*")
    if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
        return (node.target.id,)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return (node.name,) if node.name else ()
    if isinstance(node, ast.MatchMapping):
        return (node.rest,) if node.rest else ()
    return ()


def _walk_here(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and what is below it in the same scope: a def, class, lambda or comprehension is
    yielded, not entered (even when it is `node` itself)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, _NEW_SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(current))))


def _executed(node: ast.AST, local: frozenset[str] = frozenset()) -> Iterator[ast.AST]:
    """The names read when `node` runs, in order (and each `x := ...` after its value): not in
    lambda bodies or nested defs; a comprehension's own variables are left out."""
    if isinstance(node, ast.Name):
        if node.id not in local:
            yield node
        return
    if isinstance(node, ast.Lambda):
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                yield from _executed(default, local)
        return
    if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
        return
    if isinstance(node, ast.NamedExpr):
        yield from _executed(node.value, local)
        yield node
        return
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        yield from _comprehension(node, local)
        return
    for child in ast.iter_child_nodes(node):
        yield from _executed(child, local)


def _comprehension(node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp, local: frozenset[str]) -> Iterator[ast.AST]:
    inner = set(local)
    for position, generator in enumerate(node.generators):
        yield from _executed(generator.iter, local if position == 0 else frozenset(inner))
        inner |= bound_names(generator.target)
        for condition in generator.ifs:
            yield from _executed(condition, frozenset(inner))
    parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    for part in parts:
        yield from _executed(part, frozenset(inner))


# -- function bodies ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Function:
    scope: str  # `Trainer.fit`, `main.step`
    node: ast.FunctionDef | ast.AsyncFunctionDef
    enclosing: frozenset[str]  # the locals of the functions around it
    locals: frozenset[str]  # parameters included
    params: frozenset[str]
    declares_global: frozenset[str]  # `global` names in it and in the functions inside it


def _functions(body: list[ast.stmt], prefix: str, enclosing: frozenset[str]) -> Iterator[_Function]:
    """Every def in the file, each body scanned once (a class body's names are not visible in its
    methods, so they are not `enclosing`)."""
    nested = [node for stmt in body for node in _walk_here(stmt) if isinstance(node, (*_FUNCTIONS, ast.ClassDef))]
    yield from _definitions(nested, prefix, enclosing)


def _definitions(nodes: Sequence[ast.AST], prefix: str, enclosing: frozenset[str]) -> Iterator[_Function]:
    for node in nodes:
        if isinstance(node, _FUNCTIONS):
            yield from _function(node, f"{prefix}{node.name}", enclosing)
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, f"{prefix}{node.name}.", enclosing)


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, scope: str, enclosing: frozenset[str]) -> Iterator[_Function]:
    bound: set[str] = set()
    declared: set[str] = set()  # global or nonlocal
    globals_: set[str] = set()
    nested: list[ast.AST] = []
    for inner in (n for stmt in node.body for n in _walk_here(stmt)):
        bound.update(_binds(inner))
        if isinstance(inner, (*_FUNCTIONS, ast.ClassDef)):
            nested.append(inner)
        elif isinstance(inner, (ast.Global, ast.Nonlocal)):
            declared.update(inner.names)
            if isinstance(inner, ast.Global):
                globals_.update(inner.names)
    arguments = node.args
    params = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    params |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    locals_ = frozenset((bound | params) - declared)
    inner_functions = list(_definitions(nested, f"{scope}.", enclosing | locals_))
    globals_ = globals_.union(*(f.declares_global for f in inner_functions))
    yield _Function(scope, node, enclosing, locals_, frozenset(params), frozenset(globals_))
    yield from inner_functions


def _function_reads(function: _Function, globals_: frozenset[str] | None) -> list[Read]:
    """Reads of the function's own locals before the body binds them, and of names nothing binds."""
    # a tuple of the sets, not their union: a union per function would copy every global each time
    known = None if globals_ is None else (ALWAYS_BOUND, globals_, function.enclosing, function.locals)
    walker = _Walker(function.scope, bound=set(function.params), checked=set(function.locals - function.params), known=known)
    walker.block(function.node.body)
    return walker.found
