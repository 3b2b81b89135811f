"""One read-only pass over a parsed script that records the raw facts every finder needs.

The finders in this package (entry, models, loaders, loops, ...) answer questions such as
"which loader feeds the training loop" from this index alone, so the syntax tree is walked
once. Names are resolved through the script's own imports (`nn.Linear` is `torch.nn.Linear`
whether it was spelled `nn`, `torch.nn` or imported directly), which is all a training script
needs and costs a fraction of libcst's full qualified-name metadata.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import libcst as cst

T = TypeVar("T")

# Fields that hold only whitespace and punctuation: never worth descending into.
_SKIPPED_FIELDS = ("whitespace", "lpar", "rpar", "comma", "leading_lines", "lines_after_decorators",
                   "header", "footer", "semicolon", "newline", "trailing_whitespace", "equal", "dot", "colon")
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The children of a node, read straight off its fields.

    libcst's own visitors rebuild every node they pass, which costs about as much as parsing;
    analysis only reads, so it walks the frozen dataclasses directly.
    """
    names = _CHILD_FIELDS.get(type(node))
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(node) if not f.name.startswith(_SKIPPED_FIELDS))
        _CHILD_FIELDS[type(node)] = names
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and everything below it, parents first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(child_nodes(current))))


def walk(visitor: cst.CSTVisitor, node: cst.CSTNode) -> None:
    """Drive a read-only CSTVisitor (visit_X / leave_X methods) without rebuilding nodes."""
    if visitor.on_visit(node):
        for child in child_nodes(node):
            walk(visitor, child)
    visitor.on_leave(node)


def spell(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, None for anything else (calls, subscripts...)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = spell(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


@dataclass(eq=False)
class Scope:
    """A function body, or the module. Class bodies belong to no function and use the module."""

    node: cst.Module | cst.FunctionDef
    name: str  # "main", "Trainer._run_batch", "<module>"
    class_name: str | None = None
    params: tuple[str, ...] = ()

    @property
    def is_module(self) -> bool:
        return isinstance(self.node, cst.Module)


@dataclass(eq=False)
class Place:
    """Where a node sits: its innermost statement, that statement's scope and enclosing loops."""

    stmt: cst.BaseStatement
    scope: Scope
    loops: tuple[cst.For | cst.While, ...]


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    name: str | None  # qualified through imports: "torch.optim.AdamW", "model", "self.model"
    place: Place


@dataclass(eq=False)
class Binding:
    """`target = value` (one entry per name of a tuple target, value None when unpacked)."""

    target: str
    value: cst.BaseExpression | None
    node: cst.Assign | cst.AnnAssign
    place: Place


@dataclass(eq=False)
class AttributeUse:
    """`owner.attr`, for owners spelled as a name or `self.name`."""

    node: cst.Attribute
    owner: str
    called: bool  # `owner.attr(...)`
    place: Place


@dataclass(eq=False)
class Loop:
    node: cst.For | cst.While
    target: str | None  # the `for` variable when it is a plain name
    iter_names: tuple[str, ...]  # names and `self.x` spellings read in the `for` iterable
    place: Place


@dataclass(eq=False)
class ScriptIndex:
    """Everything the finders read. Built by `build_index`."""

    module: cst.Module
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    calls: list[CallSite] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    attributes: list[AttributeUse] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    functions: dict[str, Scope] = field(default_factory=dict)  # "main", "Trainer.train"
    classes: dict[str, cst.ClassDef] = field(default_factory=dict)
    block_of: dict[cst.BaseStatement, tuple[cst.Module | cst.IndentedBlock, int]] = field(default_factory=dict)
    parent_of: dict[cst.BaseStatement, cst.BaseStatement] = field(default_factory=dict)
    scope_of: dict[cst.BaseStatement, Scope] = field(default_factory=dict)
    import_stmts: list[cst.SimpleStatementLine] = field(default_factory=list)
    main_guard: cst.If | None = None
    # the dotted names of the project modules read with the script as one program (analysis.program):
    # what they define is the program's own (`engine.fit` and `from engine import fit` name `fit`)
    local_modules: frozenset[str] = frozenset()
    script_end: int | None = None  # in a program, how many of the module's statements are the script's
    _holders: dict[cst.CSTNode, cst.BaseStatement] | None = None
    # derived lookups, built on first use: the finders ask the same questions for every call site,
    # so each answer is indexed once here instead of rescanning `calls` / `bindings` per question
    _memos: dict[str, dict[Any, Any]] = field(default_factory=dict)
    _derived: dict[str, object] = field(default_factory=dict)

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The dotted name of an expression with its head resolved through the imports."""
        dotted = spell(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        resolved = self.imports.get(head)
        if resolved is not None:
            dotted = f"{resolved}.{rest}" if rest else resolved
        for module in self.local_modules:
            if dotted.startswith(module + ".") and "." not in dotted[len(module) + 1:]:
                return dotted[len(module) + 1:]
        return dotted

    @property
    def script_body(self) -> Sequence[cst.BaseStatement]:
        """The script's own top-level statements (in a program, not its modules')."""
        return self.module.body if self.script_end is None else self.module.body[:self.script_end]

    def calls_named(self, *names: str) -> list[CallSite]:
        return [c for c in self.calls if c.name in names]

    def statement_holding(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The innermost statement around a call or attribute the index knows (None otherwise)."""
        if isinstance(node, cst.BaseStatement):
            return node
        if self._holders is None:
            self._holders = {c.node: c.place.stmt for c in self.calls}
            self._holders.update({a.node: a.place.stmt for a in self.attributes})
        return self._holders.get(node)

    def memo(self, kind: str) -> dict[Any, Any]:
        """A cache for one kind of answer about this script, filled as questions come: it lives
        (and dies) with the index, so nothing leaks from one file to the next."""
        found = self._memos.get(kind)
        if found is None:
            found = self._memos[kind] = {}
        return found

    def answer(self, kind: str, key: Hashable, compute: Callable[[], T]) -> T:
        """The memoized answer to one question of `kind` about `key`, computed on first asking."""
        known = self.memo(kind)
        if key not in known:
            known[key] = compute()
        return cast(T, known[key])  # each kind's answers are of one type, the compute's

    def derived(self, kind: str, build: Callable[[], T]) -> T:
        """A fact computed from the whole script in one pass (a lookup table), built on first use."""
        if kind not in self._derived:
            self._derived[kind] = build()
        return cast(T, self._derived[kind])  # each kind's table is of one type, the build's

    def bindings_of(self, target: str) -> list[Binding]:
        """The bindings of one name (`model`, `self.model`), in source order."""
        return self.derived("bindings_of", lambda: _grouped(self.bindings, lambda b: b.target)).get(target, [])

    def bindings_of_in(self, target: str, scope: Scope) -> list[Binding]:
        """The bindings of one name in one scope, in source order."""
        by_key = self.derived("bindings_of_in", lambda: _grouped(self.bindings, lambda b: (b.target, b.place.scope)))
        return by_key.get((target, scope), [])

    def bindings_of_in_class(self, target: str, class_name: str | None) -> list[Binding]:
        """The bindings of one name in the methods of one class (None: outside any class), in source order."""
        by_key = self.derived("bindings_of_in_class", lambda: _grouped(self.bindings, lambda b: (b.target, b.place.scope.class_name)))
        return by_key.get((target, class_name), [])

    def module_bindings_of(self, target: str) -> list[Binding]:
        """The bindings of one name at module level, in source order."""
        by_key = self.derived("module_bindings_of", lambda: _grouped(self.bindings, lambda b: b.target if b.place.scope.is_module else None))
        return by_key.get(target, [])

    def bindings_in(self, scope: Scope) -> list[Binding]:
        """The bindings made in one scope (a class's methods are separate scopes), in source order."""
        return self.derived("bindings_in", lambda: _grouped(self.bindings, lambda b: b.place.scope)).get(scope, [])

    def bindings_at(self, stmt: cst.BaseStatement) -> list[Binding]:
        """The bindings one statement makes (the innermost statement around them), in source order."""
        return self.derived("bindings_at", lambda: _grouped(self.bindings, lambda b: b.place.stmt)).get(stmt, [])

    def targets_of(self, value: cst.CSTNode) -> list[str]:
        """The names bound to exactly this value node (`loader = DataLoader(...)` -> ["loader"])."""
        by_value = self.derived("targets_of", lambda: _grouped(self.bindings, lambda b: b.value))
        return [b.target for b in by_value.get(value, [])]

    def calls_from(self, scope: Scope) -> list[CallSite]:
        """The calls made in one scope, in source order."""
        return self.derived("calls_from", lambda: _grouped(self.calls, lambda c: c.place.scope)).get(scope, [])

    def call_position(self, call: CallSite) -> int:
        """Where a call comes in `calls` (source order)."""
        return self.derived("call_position", lambda: {id(c): i for i, c in enumerate(self.calls)})[id(call)]

    def statement_order(self) -> dict[cst.BaseStatement, int]:
        """Every statement's place in source order (outer statements before the ones they hold)."""
        return self.derived("statement_order", lambda: {stmt: i for i, stmt in enumerate(self.scope_of)})

    def loops_in(self, scope: Scope) -> list[Loop]:
        """The loops of one scope, in source order."""
        return self.derived("loops_in", lambda: _grouped(self.loops, lambda loop: loop.place.scope)).get(scope, [])

    def loop_of(self, node: cst.For | cst.While) -> Loop | None:
        """The Loop recorded for a `for` / `while` statement."""
        return self.derived("loop_of", lambda: {loop.node: loop for loop in reversed(self.loops)}).get(node)

    def call_site(self, node: cst.Call) -> CallSite | None:
        """The CallSite of a call node of this script (None for a node made by a rewrite)."""
        by_node: dict[int, CallSite] = self.derived("call_sites_by_node", lambda: {id(c.node): c for c in self.calls})
        return by_node.get(id(node))

    def calls_under(self, node: cst.CSTNode) -> list[cst.Call]:
        """The calls under `node` (itself included), in source order: what `calls_in` finds by
        walking, read for a statement off the index (its calls are one run of `calls`)."""
        if not isinstance(node, cst.BaseStatement) or node not in self.scope_of:
            return [child for child in descendants(node) if isinstance(child, cst.Call)]
        span = self.derived("call_spans", self._call_spans).get(node)
        return [call.node for call in self.calls[span[0] : span[1]]] if span is not None else []

    def _call_spans(self) -> dict[cst.BaseStatement, tuple[int, int]]:
        """Statement -> (first, last + 1) positions in `calls` of the calls under it. Calls are
        recorded in tree order, so those under one statement are consecutive; each statement's
        span is its own calls' widened by its children's, children (later in order) first."""
        spans: dict[cst.BaseStatement, tuple[int, int]] = {}
        for position, call in enumerate(self.calls):
            first, _last = spans.get(call.place.stmt, (position, position))
            spans[call.place.stmt] = (first, position + 1)
        for stmt in reversed(list(self.scope_of)):
            parent = self.parent_of.get(stmt)
            if parent is not None and stmt in spans:
                first, last = spans[stmt]
                if parent in spans:
                    first, last = min(first, spans[parent][0]), max(last, spans[parent][1])
                spans[parent] = (first, last)
        return spans

    def readers_in(self, scope: Scope) -> dict[str, list[cst.BaseStatement]]:
        """Name -> the statements of `scope` that read it, in source order: a simple statement that
        spells the name anywhere, a compound one whose own header (test, iterable and target,
        items) does. Built once per scope, so asking about many names reads each statement once."""
        return self.answer("readers_in", scope, lambda: self._readers_in(scope))

    def _readers_in(self, scope: Scope) -> dict[str, list[cst.BaseStatement]]:
        readers: dict[str, list[cst.BaseStatement]] = {}
        for stmt, owner in self.scope_of.items():
            if owner is scope:
                for name in {n.value for part in _header_parts(stmt) for n in descendants(part) if isinstance(n, cst.Name)}:
                    readers.setdefault(name, []).append(stmt)
        return readers

    def names_under(self, node: cst.CSTNode) -> frozenset[str]:
        """Every `Name` spelled anywhere under `node` (a function, the module), collected once."""
        return self.answer("names_under", node,
                           lambda: frozenset(n.value for n in descendants(node) if isinstance(n, cst.Name)))

    def returns_under(self, node: cst.CSTNode) -> list[cst.Return]:
        """The `return` statements under a function (nested functions included), in source order."""
        return self.answer("returns_under", node, lambda: [n for n in descendants(node) if isinstance(n, cst.Return)])

    def enclosing_statements(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        """stmt, then each compound statement around it, innermost first."""
        chain = [stmt]
        while chain[-1] in self.parent_of:
            chain.append(self.parent_of[chain[-1]])
        return chain


class _Indexer(cst.CSTVisitor):
    """Fills a ScriptIndex in one walk, keeping stacks of statements, scopes and loops."""

    def __init__(self, index: ScriptIndex) -> None:
        self.index = index
        module_scope = Scope(node=index.module, name="<module>")
        self.scopes: list[Scope] = [module_scope]
        self.classes: list[str] = []
        self.stmts: list[cst.BaseStatement] = []
        self.loops: list[list[cst.For | cst.While]] = [[]]
        self.call_funcs: set[int] = set()

    # -- places ---------------------------------------------------------------------------
    def _place(self) -> Place:
        return Place(stmt=self.stmts[-1], scope=self.scopes[-1], loops=tuple(self.loops[-1]))

    def _record_block(self, block: cst.Module | cst.IndentedBlock) -> None:
        for position, stmt in enumerate(block.body):
            self.index.block_of[stmt] = (block, position)

    def visit_Module(self, node: cst.Module) -> None:
        self._record_block(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._record_block(node)

    def _enter_statement(self, node: cst.BaseStatement) -> None:
        if self.stmts:
            self.index.parent_of[node] = self.stmts[-1]
        self.index.scope_of[node] = self.scopes[-1]
        self.stmts.append(node)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.BaseStatement):
            self._enter_statement(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        if isinstance(original_node, cst.BaseStatement):
            self.stmts.pop()

    # -- scopes -----------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.index.classes[node.name.value] = node
        self.classes.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        class_name = self.classes[-1] if self.classes else None
        name = f"{class_name}.{node.name.value}" if class_name else node.name.value
        params = tuple(p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params))
        scope = Scope(node=node, name=name, class_name=class_name, params=params)
        self.index.functions.setdefault(name, scope)
        self.scopes.append(scope)
        self.loops.append([])

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()
        self.loops.pop()

    # -- loops ------------------------------------------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        target = node.target.value if isinstance(node.target, cst.Name) else None
        self.index.loops.append(Loop(node, target, _names_in(node.iter), self._place()))
        self.loops[-1].append(node)

    def leave_For(self, original_node: cst.For) -> None:
        self.loops[-1].pop()

    def visit_While(self, node: cst.While) -> None:
        self.index.loops.append(Loop(node, None, (), self._place()))
        self.loops[-1].append(node)

    def leave_While(self, original_node: cst.While) -> None:
        self.loops[-1].pop()

    def visit_If(self, node: cst.If) -> None:
        if self.scopes[-1].is_module and _is_main_guard(node.test):
            self.index.main_guard = node

    # -- facts ------------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = spell(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.index.imports[alias.asname.name.value] = dotted
            else:
                head = dotted.split(".")[0]
                self.index.imports.setdefault(head, head)
        self._note_import_line()

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = spell(node.module) if node.module is not None else ""
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                name = spell(alias.name) or ""
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
                self.index.imports[local] = f"{module}.{name}" if module else name
        self._note_import_line()

    def _note_import_line(self) -> None:
        stmt = self.stmts[-1]
        if self.scopes[-1].is_module and isinstance(stmt, cst.SimpleStatementLine) and stmt not in self.index.parent_of:
            if not self.index.import_stmts or self.index.import_stmts[-1] is not stmt:
                self.index.import_stmts.append(stmt)

    def visit_Call(self, node: cst.Call) -> None:
        self.call_funcs.add(id(node.func))
        self.index.calls.append(CallSite(node, self.index.qualify(node.func), self._place()))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value, node)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None, node: cst.Assign | cst.AnnAssign) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
            paired = len(values) == len(target.elements) and not any(isinstance(v, cst.StarredElement) for v in values)
            for position, element in enumerate(target.elements):  # `a, b = x, y` binds a to x
                self._bind(element.value, values[position].value if paired else None, node)
            return
        name = spell(target)
        if name is not None:
            self.index.bindings.append(Binding(name, value, node, self._place()))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        owner = spell(node.value)
        # `model.x`, `self.model.x`, and through a wrapper's `.module`: `self.model.module.x`
        if owner is not None and (owner.count(".") <= 1 or owner.count(".") == 2 and owner.endswith(".module")):
            self.index.attributes.append(AttributeUse(node, owner, id(node) in self.call_funcs, self._place()))


def _names_in(node: cst.CSTNode) -> tuple[str, ...]:
    """Names and `self.x` spellings read anywhere inside an expression."""
    found: list[str] = []
    for child in descendants(node):
        if isinstance(child, cst.Name):
            found.append(child.value)
        elif isinstance(child, cst.Attribute):
            dotted = spell(child)
            if dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1:
                found.append(dotted)
    return tuple(n for n in found if n != "self")


def names_in(node: cst.CSTNode) -> tuple[str, ...]:
    return _names_in(node)


def read_names(node: cst.CSTNode) -> set[str]:
    """The variables an expression reads: `args.lr * n` -> {"args", "n"}; `self.x` counts as one."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Attribute):
            dotted = spell(current)
            if dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1:
                found.add(dotted)
            else:
                stack.append(current.value)
        elif isinstance(current, cst.Name):
            found.add(current.value)
        else:
            stack.extend(child_nodes(current))
    return found


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = {spell(test.left), _string_value(test.comparisons[0].comparator)}
    return sides == {"__name__", "__main__"} or {_string_value(test.left), spell(test.comparisons[0].comparator)} == {
        "__main__",
        "__name__",
    }


def _string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    return None


def _header_parts(stmt: cst.BaseStatement) -> list[cst.CSTNode]:
    """What a statement itself reads: all of a simple statement; a compound one's header only."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return [stmt]
    if isinstance(stmt, (cst.If, cst.While)):
        return [stmt.test]
    if isinstance(stmt, cst.For):
        return [stmt.iter, stmt.target]
    if isinstance(stmt, cst.With):
        return list(stmt.items)
    return []


def _grouped(items: list[T], key: Callable[[T], object]) -> dict[object, list[T]]:
    """`items` grouped by `key`, each group in the order of `items` (None keys left out)."""
    groups: dict[object, list[T]] = {}
    for item in items:
        found = key(item)
        if found is not None:
            groups.setdefault(found, []).append(item)
    return groups


def build_index(module: cst.Module, local_modules: frozenset[str] = frozenset(),
                script_end: int | None = None) -> ScriptIndex:
    """The index of a script; with `local_modules`, of a program (analysis.program) whose parts
    import each other under those dotted names, the script's statements the first `script_end`."""
    index = ScriptIndex(module=module, local_modules=local_modules, script_end=script_end)
    walk(_Indexer(index), module)
    return index


def reachable(edges: Mapping[str, Iterable[str]], start: Iterable[str]) -> set[str]:
    """`start` and every name reached from it along `edges` (callee -> callers, name -> readers...)."""
    reached = set(start)
    pending = list(reached)
    while pending:
        for following in edges.get(pending.pop(), ()):
            if following not in reached:
                reached.add(following)
                pending.append(following)
    return reached


def free_name(name: str, used: Iterable[str]) -> str:
    """`name`, or `name_`, `name_2`, `name_3`...: the first that `used` does not hold (a name the
    conversion adds must not shadow one of the script's)."""
    taken = set(used)
    return next((c for c in [name, f"{name}_"] + [f"{name}_{n}" for n in range(2, 100)] if c not in taken), name)
