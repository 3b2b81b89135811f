"""Reads the numbers a script trains with, for generated configs, by following a value back to
where the script writes it.

An expression is followed one way at a time, each way a function of its own:

- a name bound once in its function (`bs = args.batch_size`): `_through_binding`
- a name a function does not bind, bound once at module level (`BATCH = 64`): `_through_module_constant`
- a function parameter, to what every caller passes or its default: `_through_parameter`
- a call of a function of this file, to what it returns (`args = get_args()`): `_through_return`
- an entry of a dict literal (`config = {"batch_size": 64}`, `config["batch_size"]`): `_through_dict_entry`
- an attribute of parsed arguments, to its `add_argument(..., default=16)`: `_through_argparse_default`
- an attribute of an instance of a class of this file, to what its methods bind to `self.x`:
  `_through_instance_attribute`

`origins` gives what an expression is made from (several places when callers differ);
`literal_value` the number, when every origin writes the same one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import Binding, CallSite, Scope, ScriptIndex, child_nodes, descendants, spell
from migrate.analysis.syntax import argument
from migrate.analysis.training import callee_scope, callers_of

Number = int | float | bool

MAX_LITERAL_DIGITS = 40
MAX_DEPTH = 12  # names followed one after another before giving up
MAX_ORIGINS = 32  # places a value may come from before it counts as unknown
PARSE_ARGS = ("parse_args", "parse_known_args")
DICT_WRITERS = ("update", "setdefault", "pop", "popitem", "clear", "__setitem__")

Sources = list[tuple[cst.BaseExpression, Scope]]  # what one way leads to: expressions and the scopes they are read in


@dataclass(frozen=True)
class Origin:
    """Where a value is made: a literal, a call, a dict, or an expression that could not be
    followed further (`unknown`), with the scope it is read in."""

    node: cst.BaseExpression
    scope: Scope
    unknown: bool = False


def literal_value(index: ScriptIndex, expr: cst.BaseExpression | None, scope: Scope | None = None) -> Number | None:
    """The number `expr` (read in `scope`, the module's when None) always has in the script, or
    None when it is not one number: every place it can come from must write the same literal."""
    if expr is None:
        return None
    found = [_number(index, origin) for origin in origins(index, expr, scope)]
    first = found[0]
    if first is None or any(type(value) is not type(first) or value != first for value in found):
        return None
    return first


def _number(index: ScriptIndex, origin: Origin) -> Number | None:
    """The number a literal writes: `64`, `1e-3`, `True`, `-2` (None for anything else)."""
    expr = origin.node
    if isinstance(expr, (cst.Integer, cst.Float)) and len(expr.value) > MAX_LITERAL_DIGITS:
        return None  # no batch size or learning rate has thousands of digits (and Python refuses to read them)
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if isinstance(expr, cst.Float):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = literal_value(index, expr.expression, origin.scope)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else None
    return None


def origins(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope | None = None) -> list[Origin]:
    """Where the value of `expr` (read in `scope`, the module's when None) is made, following it
    through names, parameters, returns, dict entries and argparse defaults."""
    return _follow(index, expr, scope or module_scope(index), 0)


def _follow(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[Origin]:
    if depth > MAX_DEPTH:
        return [Origin(expr, scope, unknown=True)]
    for way in WAYS:
        step = way(index, expr, scope)
        if step is None:
            continue
        found = [origin for node, where in step for origin in _follow(index, node, where, depth + 1)]
        return found if len(found) <= MAX_ORIGINS else [Origin(expr, scope, unknown=True)]
    return [Origin(expr, scope, unknown=_unresolved(expr))]


def _unresolved(expr: cst.BaseExpression) -> bool:
    """A name or an attribute no way could follow: its value is not known here."""
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)) and spell(expr) not in ("True", "False", "None")


# -- the ways -------------------------------------------------------------------------------------
# Each takes an expression and the scope it is read in, and returns where its value comes from,
# or None when it does not apply (or cannot tell): the expression is then where the value is made.

def _through_binding(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope) -> Sources | None:
    """A name bound exactly once in its function (`bs = args.batch_size`), or `self.x` bound
    exactly once in the methods of its class (`self.train_data = train_data`)."""
    name = spell(expr)
    if name is None:
        return None
    if name.startswith("self.") and name.count(".") == 1 and scope.class_name is not None:
        bindings = index.bindings_of_in_class(name, scope.class_name)
    elif "." not in name and name not in _stored_otherwise(index, scope):
        bindings = index.bindings_of_in(name, scope)
    else:
        return None
    return _bound_value(index, bindings[0]) if len(bindings) == 1 else None


def _through_module_constant(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope) -> Sources | None:
    """A name a function reads but neither binds nor takes as a parameter: the module's, when it
    binds it exactly once (`BATCH_SIZE = 64`)."""
    if not isinstance(expr, cst.Name) or scope.is_module or expr.value in scope.params:
        return None
    if index.bindings_of_in(expr.value, scope) or expr.value in _stored_otherwise(index, scope):
        return None
    if expr.value in _stored_otherwise(index, module_scope(index)):
        return None
    bindings = index.module_bindings_of(expr.value)
    return _bound_value(index, bindings[0]) if len(bindings) == 1 else None


def _through_parameter(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope) -> Sources | None:
    """A parameter the function does not rebind: what each caller of this file passes for it, or
    its default where a caller passes nothing (the default alone when no caller is found)."""
    if not isinstance(expr, cst.Name) or expr.value not in scope.params or index.bindings_of_in(expr.value, scope):
        return None
    if expr.value in _stored_otherwise(index, scope):
        return None
    assert isinstance(scope.node, cst.FunctionDef)
    param = expr.value
    default = _default(scope.node, param)
    position = scope.params.index(param) - (1 if scope.class_name else 0)
    found: Sources = []
    for call in _calls_of(index, scope):
        passed = argument(call.node, param, position)
        if passed is not None:
            found.append((passed.value, call.place.scope))
        elif default is not None and not any(arg.star for arg in call.node.args):
            found.append((default, module_scope(index)))
        else:
            return None
    if not found and default is not None:
        found.append((default, module_scope(index)))
    return found or None


def _through_return(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope) -> Sources | None:
    """A call of a function of this file (not a generator): what its `return` statements give."""
    return _returned(index, expr, None)


def _through_dict_entry(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope) -> Sources | None:
    """`config["batch_size"]` where `config` is a dict literal (`{"batch_size": 64}`) or
    `dict(batch_size=64)` that nothing writes that key of: the entry's value."""
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1:
        return None
    index_slice = expr.slice[0].slice
    if not isinstance(index_slice, cst.Index) or not isinstance(index_slice.value, cst.SimpleString):
        return None
    key = index_slice.value.evaluated_value
    return dict_entry(index, expr.value, key, scope) if isinstance(key, str) else None


def _through_argparse_default(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope) -> Sources | None:
    """`args.batch_size` where `args` holds parsed arguments (`parser.parse_args()`, also returned
    by a helper or passed as a parameter): the `default=` of the matching `add_argument`. An
    attribute the script assigns itself (`args.batch_size = 8`) is not the default."""
    if not isinstance(expr, cst.Attribute) or not _is_parsed_args(index, expr.value, scope):
        return None
    if index.bindings_of(spell(expr) or ""):
        return None
    found = _add_argument(index, expr.attr.value)
    if found is None:
        return None
    default = _keyword(found.node, "default")
    return [(default, found.place.scope)] if default is not None else None


def _through_instance_attribute(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope) -> Sources | None:
    """`model.batch_size` where `model` is made by a class of this file (`Regressor()`): the value
    its methods bind to `self.batch_size`, exactly once (and nothing assigns `model.batch_size`)."""
    if not isinstance(expr, cst.Attribute) or index.bindings_of(spell(expr) or ""):
        return None
    made_by = {_class_called(index, origin.node) for origin in origins(index, expr.value, scope)}
    if len(made_by) != 1 or None in made_by:
        return None
    bindings = index.bindings_of_in_class(f"self.{expr.attr.value}", made_by.pop())
    return _bound_value(index, bindings[0]) if len(bindings) == 1 else None


def _class_called(index: ScriptIndex, node: cst.BaseExpression) -> str | None:
    """`Regressor(...)` -> "Regressor", for a class of this file."""
    name = spell(node.func) if isinstance(node, cst.Call) else None
    return name if name in index.classes else None


WAYS: tuple[Callable[[ScriptIndex, cst.BaseExpression, Scope], Sources | None], ...] = (
    _through_argparse_default,
    _through_instance_attribute,
    _through_dict_entry,
    _through_binding,
    _through_module_constant,
    _through_parameter,
    _through_return,
)


# -- helpers of the ways --------------------------------------------------------------------------

def module_scope(index: ScriptIndex) -> Scope:
    """The module's own scope (what names outside every function are bound in)."""
    return index.derived("module_scope", lambda: _module_scope(index))


def _module_scope(index: ScriptIndex) -> Scope:
    found = next((scope for scope in index.scope_of.values() if scope.is_module), None)
    return found or Scope(node=index.module, name="<module>")


def _bound_value(index: ScriptIndex, binding: Binding) -> Sources | None:
    """What a binding gives its name: the value, or for `a, b = make()` the element `make`
    returns in that place (`args, _ = parser.parse_known_args()`: the parsed arguments)."""
    if binding.value is not None:
        return [(binding.value, binding.place.scope)]
    node = binding.node
    target = node.targets[0].target if isinstance(node, cst.Assign) and len(node.targets) == 1 else None
    if not isinstance(target, (cst.Tuple, cst.List)) or node.value is None:
        return None
    positions = [i for i, element in enumerate(target.elements) if spell(element.value) == binding.target]
    if positions == [0] and _parses_args(node.value):
        return [(node.value, binding.place.scope)]
    return _returned(index, node.value, positions[0]) if len(positions) == 1 else None


def _returned(index: ScriptIndex, expr: cst.BaseExpression, position: int | None) -> Sources | None:
    """What a call of a function of this file returns (the element at `position` of a returned
    tuple when given); None for a generator, a bare `return` or a function that returns nothing."""
    if not isinstance(expr, cst.Call):
        return None
    site = index.derived("call_sites", lambda: {id(c.node): c for c in index.calls}).get(id(expr))
    helper = callee_scope(index, site) if site is not None else None
    if helper is None or not isinstance(helper.node, cst.FunctionDef):
        return None
    returns = list(_own_returns(helper.node))
    if not returns or any(isinstance(node, (cst.Yield, cst.Await)) for node in _own_nodes(helper.node)):
        return None
    found: Sources = []
    for node in returns:
        value = node.value
        if position is not None:
            elements = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
            value = elements[position].value if position < len(elements) else None
        if value is None:
            return None
        found.append((value, helper))
    return found


def _own_nodes(owner: cst.Module | cst.FunctionDef) -> Iterator[cst.CSTNode]:
    """The nodes of a function's body (or a module's), without those of the functions and
    classes inside it."""
    stack: list[cst.CSTNode] = [owner.body] if isinstance(owner, cst.FunctionDef) else list(owner.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(child_nodes(node))


def _own_returns(function: cst.FunctionDef) -> Iterator[cst.Return]:
    return (node for node in _own_nodes(function) if isinstance(node, cst.Return))


def _stored_otherwise(index: ScriptIndex, scope: Scope) -> frozenset[str]:
    """The names a scope stores other than by `name = value`: `for` and `with ... as` targets,
    `+=`, `:=`, comprehension variables, `global` / `nonlocal` (none of them is one value)."""
    return index.answer("stored_otherwise", id(scope.node), lambda: frozenset(_other_stores(scope)))


def _other_stores(scope: Scope) -> Iterator[str]:
    for node in _own_nodes(scope.node):
        targets: list[cst.CSTNode] = []
        if isinstance(node, (cst.For, cst.CompFor, cst.AugAssign, cst.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            targets = [item.name for item in node.names]
        for target in targets:
            yield from (n.value for n in descendants(target) if isinstance(n, cst.Name))


def _calls_of(index: ScriptIndex, scope: Scope) -> list[CallSite]:
    """The calls of this file that run a function: `Trainer(...)` for `Trainer.__init__`."""
    if scope.class_name is not None and scope.name == f"{scope.class_name}.__init__":
        return index.calls_named(scope.class_name)
    return callers_of(index, scope)


def _default(function: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param.default
    return None


def dict_entry(index: ScriptIndex, table: cst.BaseExpression, key: str, scope: Scope) -> Sources | None:
    """The value under `key` of the dict literal(s) `table` is made from (read in `scope`), when
    every one holds the key and nothing in the script writes it."""
    found: Sources = []
    for origin in origins(index, table, scope):
        value = _entry(origin.node, key)
        if value is None or _dict_written(index, origin.node, key):
            return None
        found.append((value, origin.scope))
    return found


def _entry(table: cst.BaseExpression, key: str) -> cst.BaseExpression | None:
    """`{"key": value}` / `dict(key=value)` -> value."""
    if isinstance(table, cst.Dict):
        for element in table.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) and element.key.evaluated_value == key:
                return element.value
    if isinstance(table, cst.Call) and isinstance(table.func, cst.Name) and table.func.value == "dict":
        return _keyword(table, key)
    return None


def _dict_written(index: ScriptIndex, table: cst.BaseExpression, key: str) -> bool:
    """Whether the script may change `key` of that dict: `anything[key] = ...` anywhere, or an
    `update()` (and the like) on a name made from it, unless every argument is a dict without it."""
    if key in index.derived("written_keys", lambda: _written_keys(index)):
        return True
    for call in index.calls:
        func = call.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in DICT_WRITERS:
            continue
        if any(origin.node is table for origin in origins(index, func.value, call.place.scope)) and not _leaves_key(index, call, key):
            return True
    return False


def _leaves_key(index: ScriptIndex, call: CallSite, key: str) -> bool:
    """`d.update(other)` where every `other` is a dict literal without `key` (no keywords)."""
    func = call.node.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "update":
        return False
    for arg in call.node.args:
        if arg.keyword is not None or arg.star:
            return False
        for origin in origins(index, arg.value, call.place.scope):
            if not isinstance(origin.node, cst.Dict) or _entry(origin.node, key) is not None:
                return False
    return True


def _written_keys(index: ScriptIndex) -> set[str]:
    """Every string key the script assigns through a subscript: `config["batch_size"] = 8`."""
    keys: set[str] = set()
    for node in descendants(index.module):
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, cst.Subscript) and len(target.slice) == 1:
                part = target.slice[0].slice
                if isinstance(part, cst.Index) and isinstance(part.value, cst.SimpleString):
                    keys.add(str(part.value.evaluated_value))
    return keys


def _is_parsed_args(index: ScriptIndex, owner: cst.BaseExpression, scope: Scope) -> bool:
    """Whether `owner` holds parsed command-line arguments: every place it comes from is a
    `parse_args()` call, or (when it cannot be followed) its name is bound to one somewhere."""
    found = origins(index, owner, scope)
    if all(_parses_args(origin.node) for origin in found):
        return True
    name = spell(owner)
    return any(origin.unknown for origin in found) and name is not None and any(
        isinstance(b.value, cst.Call) and _parses_args(b.value) for b in index.bindings_of(name)
    )


def _parses_args(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in PARSE_ARGS


def _add_argument(index: ScriptIndex, dest: str) -> CallSite | None:
    """The first `add_argument` call whose destination is `dest` (`--batch-size` -> batch_size)."""
    for call in index.calls:
        if isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value == "add_argument" and _destination(call.node) == dest:
            return call
    return None


def _destination(call: cst.Call) -> str | None:
    names = [a.value.evaluated_value for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
    declared = _keyword(call, "dest")
    if isinstance(declared, cst.SimpleString) and isinstance(declared.evaluated_value, str):
        return declared.evaluated_value
    # argparse's rule: the first `--long` option, else the first `-short` one (`-grad_clip` -> grad_clip),
    # leading dashes stripped and inner ones made underscores; a positional argument is its own name
    options = [n for n in names if isinstance(n, str) and n.startswith("-")]
    long_names = [n for n in options if n.startswith("--")]
    positional = [n for n in names if isinstance(n, str) and not n.startswith("-")]
    if options:
        return (long_names or options)[0].lstrip("-").replace("-", "_") or None
    return positional[0] if positional else None


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None
