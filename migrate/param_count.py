"""Counts a training script's parameters without running it, for `migrate advise`.

The models are the ones the conversions wrap (`migrate.analysis.analyze`: modules whose forward
feeds backward), each traced to the call that builds it (`migrate.analysis.upstream.model_class_call`).
A class of the script, or of a module of its folder that it imports (found by the reader of
`migrate.analysis.blocks`), is read from its `__init__`: the call's arguments and the defaults bind
its parameters, then its statements run in order: `name = ...` and `self.x = <number>` bind
numbers, `self.x = <layer>` and `self.x.append(<layer>)` count a layer, `self.w = nn.Parameter(
torch.randn(a, b))` counts a tensor, `for _ in range(n):` counts its body n times, an `if` whose test
is known takes its branch, `super().__init__(...)` reads a base class of the script's. A layer bound
to a local name is counted where it is used (`self.x = layer`, `blocks.append(layer)`,
`nn.TransformerEncoder(layer, n)`, `self.add_module("x", layer)`), as torch registers it. A
parameter of `__init__` the call leaves unknown stays unknown (never read from another caller of
the class). Where the model's name is built by several calls under `if`s (`if arch == "big":
net = Big() else: net = Small()`), the one whose tests hold is counted; tests it cannot decide are
named in `unsized`.

torch's layers by their formulas: nn.Linear, nn.Bilinear, nn.Conv1d/2d/3d and ConvTranspose,
nn.Embedding, nn.LayerNorm, nn.BatchNorm*, nn.GroupNorm, nn.InstanceNorm* (affine), nn.PReLU,
nn.LSTM/GRU/RNN (with num_layers, bias, bidirectional), nn.MultiheadAttention (bias, add_bias_kv,
kdim/vdim), nn.TransformerEncoderLayer/DecoderLayer; nn.Sequential and nn.ModuleList of their
arguments (`*[Block() for _ in range(n)]`, list comprehensions over `range`); activations, pooling,
dropout, losses and the like hold none.
Values are literals, arithmetic, comparisons (`==`, `<`, `in`, `is None`), `and`/`or`/`x if c else y`,
tuples, lists, sets and dicts (a configuration dict read by `cfg["emb_dim"]`), comprehensions with
one `for` over a known sequence, indexing, `len`/`min`/`max`/`int`/`sum`/`sorted`/`range`/`enumerate`,
the `string` module's constants, and what `migrate.analysis.values.origins` follows a name to (module constants,
argparse defaults, function parameters and their callers).

A layer it cannot size (a number it cannot read, a class it cannot find, a layer kind it does not
know, an `if` it cannot decide) counts as 0 and is named in `Count.unsized` with its line: the total
is then a lower bound. Not seen: weights shared between layers (`head.weight = emb.weight` is counted
twice), parameters made outside `__init__`. `largest_layer` is what DeepSpeed's estimators call the
largest layer: the most parameters one module holds itself (not through its children).
"""

from __future__ import annotations

import math
import os
import string
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import libcst as cst

from migrate.analysis import analyze
from migrate.analysis.blocks import SourceFile, _Reader
from migrate.analysis.index import Scope, ScriptIndex, build_index, descendants, spell
from migrate.analysis.positions import Positions
from migrate.analysis.upstream import model_class_call
from migrate.analysis.values import origins
from migrate.records import InputError
from migrate.sources import printable, read

MAX_DEPTH = 16  # classes within classes, names followed within names
# a dict is a Mapping (a tuple of its items); complex and bytes: a literal `1j`, `b"..."`
Value = int | float | complex | bool | str | bytes | tuple["Value", ...] | None


class Mapping(tuple[tuple[Value, Value], ...]):
    """A dict the count read (`{"emb_dim": 768}`): its items, in order; hashable, like every Value."""

    def get_item(self, key: Value) -> Value:
        for known, value in self:
            if known == key:
                return value
        raise KeyError(key)

    def keys(self) -> tuple[Value, ...]:
        return tuple(known for known, _ in self)


@dataclass(frozen=True)
class Unsized:
    """A layer (or a part of the model) this count could not size, and why."""

    name: str  # `CharTransformer.tok_emb`, or the spelling of the call
    path: str
    line: int
    col: int
    why: str

    def __str__(self) -> str:
        return f"{printable(self.path)}:{self.line}:{self.col}: {self.name}: {self.why}"


@dataclass(frozen=True)
class Count:
    """The parameters of a script's trained models."""

    total: int
    largest_layer: int
    models: tuple[str, ...]  # how the script spells each model counted
    unsized: tuple[Unsized, ...] = ()


@dataclass
class _Sized:
    total: int = 0
    largest: int = 0

    def add(self, other: _Sized, times: int = 1) -> None:
        self.total += other.total * times
        self.largest = max(self.largest, other.largest)


class _Arguments(dict[str, "Value | _Unknown"]):
    """A layer's arguments by name; reading one whose value is unknown raises why."""

    def __getitem__(self, key: str) -> Value:
        found = super().__getitem__(key)
        if isinstance(found, _Unknown):
            raise found
        return found


class _Read(Protocol):
    """What a layer's formula reads its arguments from: _Arguments, or a plain dict of Values."""

    def __getitem__(self, key: str, /) -> Value: ...


class _Unknown(Exception):
    """A value this count cannot read: `why` says which."""

    def __init__(self, node: cst.CSTNode, why: str) -> None:
        super().__init__(why)
        self.node = node
        self.why = why


@dataclass(eq=False)
class _File:
    """A file classes are read from: its tree, index, positions and (for the reader) SourceFile."""

    path: str
    index: ScriptIndex
    positions: Positions
    source: SourceFile

    def scope(self, stmt: cst.CSTNode) -> Scope | None:
        return self.index.scope_of.get(stmt) if isinstance(stmt, cst.BaseStatement) else None


@dataclass(eq=False)
class _Frame:
    """One class's `__init__` being read: its file, the names bound so far, the statement being read."""

    file: _File
    env: dict[str, Value | _Unknown]  # a name bound to why its value is unknown raises that where it is read
    owner: str  # the class's name, for naming unsized layers
    stmt: cst.CSTNode
    depth: int = 0
    layers: dict[str, cst.BaseExpression] = field(default_factory=dict)  # local names bound to a layer
    lists: set[str] = field(default_factory=set)  # local lists whose appended layers were counted


@dataclass(eq=False)
class _Counter:
    reader: _Reader
    files: dict[str, _File] = field(default_factory=dict)
    unsized: list[Unsized] = field(default_factory=list)

    # -- files ---------------------------------------------------------------------------------

    def file(self, path: str) -> _File | None:
        """A module of the script's folder, parsed here once (so positions and index match its nodes)."""
        if path not in self.files:
            try:
                code = read(path).text
                tree = cst.parse_module(code)
            except (InputError, cst.ParserSyntaxError):
                return None
            index = build_index(tree)
            source = SourceFile(None, dict(index.classes), dict(index.imports), path)
            self.files[path] = _File(path, index, Positions(tree, code), source)
        return self.files[path]

    def locate(self, qualified: str, file: _File) -> tuple[cst.ClassDef, _File] | None:
        """The class a qualified name means, in this file or a module of the script's folder."""
        found = self.reader.locate(qualified, file.source)
        if found is None:
            return None
        cls, source = found
        if source.path == file.path:
            return cls, file
        other = self.file(source.path)
        if other is None or cls.name.value not in other.index.classes:
            return None
        return other.index.classes[cls.name.value], other

    def skip(self, frame: _Frame, node: cst.CSTNode, name: str, why: str) -> _Sized:
        line, col = frame.file.positions.of(node, frame.stmt if isinstance(frame.stmt, cst.BaseStatement) else None)
        entry = Unsized(name, frame.file.path, line, col, why)
        if entry not in self.unsized:
            self.unsized.append(entry)
        return _Sized()

    # -- values --------------------------------------------------------------------------------

    def value(self, expr: cst.BaseExpression, frame: _Frame) -> Value:
        """The number (or string, or tuple) `expr` has when the class is built; raises _Unknown."""
        if frame.depth > MAX_DEPTH:
            raise _Unknown(expr, "followed too far")
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
            return expr.evaluated_value
        if isinstance(expr, cst.ConcatenatedString):
            return str(self.value(expr.left, frame)) + str(self.value(expr.right, frame))
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return self.elements(expr, frame)
        if isinstance(expr, cst.Dict):
            return self.mapping(expr, frame)
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            return self.comprehension(expr, frame)
        if isinstance(expr, cst.Subscript):
            return self.subscripted(expr, frame)
        if isinstance(expr, cst.Comparison):
            return self.compared(expr, frame)
        if isinstance(expr, cst.BooleanOperation):
            left = self.value(expr.left, frame)
            keeps_left = bool(left) if isinstance(expr.operator, cst.Or) else not left
            return left if keeps_left else self.value(expr.right, frame)
        if isinstance(expr, cst.IfExp):
            return self.value(expr.body if self.value(expr.test, frame) else expr.orelse, frame)
        if isinstance(expr, cst.UnaryOperation):
            return _unary(expr, self.value(expr.expression, frame))
        if isinstance(expr, cst.BinaryOperation):
            return _binary(expr, self.value(expr.left, frame), self.value(expr.right, frame))
        if isinstance(expr, cst.Call):
            return self.call_value(expr, frame)
        return self.named_value(expr, frame)

    def elements(self, expr: cst.Tuple | cst.List | cst.Set, frame: _Frame) -> tuple[Value, ...]:
        """A tuple, list or set display (`*x` spreads a known sequence; a set keeps the first of equals)."""
        found: list[Value] = []
        for element in expr.elements:
            if isinstance(element, cst.StarredElement):
                found += list(_sequence(element, self.value(element.value, frame)))
            else:
                found.append(self.value(element.value, frame))
        return tuple(dict.fromkeys(found)) if isinstance(expr, cst.Set) else tuple(found)

    def mapping(self, expr: cst.Dict, frame: _Frame) -> Mapping:
        """`{"vocab": 50257, **base}`: a configuration dict, read by `cfg["vocab"]` and `len()`."""
        found: dict[Value, Value] = {}
        for element in expr.elements:
            if isinstance(element, cst.StarredDictElement):
                found.update(_as_mapping(element, self.value(element.value, frame)))
            else:
                assert isinstance(element, cst.DictElement)  # the other kind of element
                found[self.value(element.key, frame)] = self.value(element.value, frame)
        return Mapping(found.items())

    def comprehension(self, expr: cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp,
                      frame: _Frame) -> Value:
        """`[c for c in "abc"]`, `{w: i for i, w in enumerate(words)}`: one `for` over a known sequence."""
        loop = expr.for_in
        if loop.inner_for_in is not None or loop.ifs:
            raise _Unknown(expr, "a comprehension with several `for`s or an `if`")
        found: list[Value] = []
        pairs: list[tuple[Value, Value]] = []  # a dict comprehension's
        for item in _sequence(loop.iter, self.value(loop.iter, frame)):
            inner = _Frame(frame.file, {**frame.env, **_unpacked(loop.target, item)}, frame.owner, frame.stmt,
                           frame.depth + 1)
            if isinstance(expr, cst.DictComp):
                pairs.append((self.value(expr.key, inner), self.value(expr.value, inner)))
            else:
                found.append(self.value(expr.elt, inner))
        if isinstance(expr, cst.DictComp):
            return Mapping(dict(pairs).items())
        return tuple(dict.fromkeys(found)) if isinstance(expr, cst.SetComp) else tuple(found)

    def subscripted(self, expr: cst.Subscript, frame: _Frame) -> Value:
        """`cfg["emb_dim"]`, `sizes[0]` (the whole expression named when its container is unknown)."""
        try:
            container = self.value(expr.value, frame)
        except _Unknown as unknown:
            raise _Unknown(expr, f"`{_code(expr)}`: {unknown.why}") from None
        return _subscript(expr, container, self.index_value(expr, frame))

    def index_value(self, expr: cst.Subscript, frame: _Frame) -> Value:
        """The key of `x[key]` (one index, no slice)."""
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            raise _Unknown(expr, f"`{_code(expr)}` is not a value this count can read")
        return self.value(expr.slice[0].slice.value, frame)

    def compared(self, expr: cst.Comparison, frame: _Frame) -> bool:
        """`a == b`, `a < b <= c`, `x in (...)`, `x is None`."""
        left = self.value(expr.left, frame)
        for target in expr.comparisons:
            right = self.value(target.comparator, frame)
            operation = COMPARE.get(type(target.operator))
            if operation is None:
                raise _Unknown(expr, f"`{_code(expr)}` is not a value this count can read")
            try:
                holds = operation(left, right)
            except TypeError as error:
                raise _Unknown(expr, str(error)) from None
            if not holds:
                return False
            left = right
        return True

    def named_value(self, expr: cst.BaseExpression, frame: _Frame) -> Value:
        """A name: bound in `__init__`, True/False/None, a `string` constant, or followed by origins()."""
        spelled = spell(expr)
        if spelled is None:
            raise _Unknown(expr, f"`{_code(expr)}` is not a value this count can read")
        if spelled in frame.env:
            found = frame.env[spelled]
            if isinstance(found, _Unknown):
                raise _Unknown(expr, f"`{spelled}`: {found.why}")
            return found
        if spelled in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[spelled]
        qualified = frame.file.index.qualify(expr) or ""
        if qualified.startswith("string.") and isinstance(constant := getattr(string, qualified[7:], None), str):
            return constant
        scope = frame.file.scope(frame.stmt)
        if scope is None or spelled.startswith("self."):
            raise _Unknown(expr, f"`{spelled}` is not known")
        return self.followed(expr, scope, frame)

    def followed(self, expr: cst.BaseExpression, scope: Scope, frame: _Frame) -> Value:
        found = origins(frame.file.index, expr, scope)
        values = set()
        for origin in found:
            if origin.unknown or origin.node is expr:
                raise _Unknown(expr, f"`{_code(expr)}` has no value this count can read")
            stmt = next(iter(_statements_of(frame.file.index, origin.scope)), frame.stmt)
            inner = _Frame(frame.file, {}, frame.owner, stmt, frame.depth + 1)
            values.add(self.value(origin.node, inner))
        if len(values) != 1:
            raise _Unknown(expr, f"`{_code(expr)}` has different values")
        return values.pop()

    def call_value(self, call: cst.Call, frame: _Frame) -> Value:
        """`len(...)`, `min`/`max`/`int`/`abs`/`round`, `math.prod`/`math.ceil`/`math.floor` of known values."""
        name = frame.file.index.qualify(call.func) or ""
        functions = {**FUNCTIONS, "range": _range}
        if name not in functions or any(arg.keyword is not None or arg.star for arg in call.args):
            raise _Unknown(call, f"`{_code(call.func)}(...)` is not a value this count can read")
        arguments = [self.value(arg.value, frame) for arg in call.args]
        try:
            return functions[name](*arguments)
        except (TypeError, ValueError) as error:
            raise _Unknown(call, str(error)) from None

    def number(self, expr: cst.BaseExpression, frame: _Frame) -> int:
        found = self.value(expr, frame)
        if isinstance(found, bool) or not isinstance(found, int) or found < 0:
            raise _Unknown(expr, f"`{_code(expr)}` is not a size ({found!r})")
        return found

    # -- modules -------------------------------------------------------------------------------

    def module(self, expr: cst.BaseExpression, frame: _Frame, name: str) -> _Sized:
        """The parameters of the module `expr` builds (counted 0, and named, when it cannot tell)."""
        try:
            return self.built(expr, frame, name)
        except _Unknown as unknown:
            return self.skip(frame, unknown.node, name, unknown.why)

    def built(self, expr: cst.BaseExpression, frame: _Frame, name: str) -> _Sized:
        expr = _unmoved(expr)
        if isinstance(expr, cst.Name) and expr.value in frame.layers:
            expr = frame.layers[expr.value]  # `layer = nn.Linear(...)` in `__init__`, then used
        if not isinstance(expr, cst.Call):
            raise _Unknown(expr, f"`{_code(expr)}` is not a layer this count can build")
        qualified = frame.file.index.qualify(expr.func) or ""
        if qualified in ("torch.nn.Sequential", "torch.nn.ModuleList"):
            return self.container(expr, frame, name)
        if qualified in ("torch.nn.TransformerEncoder", "torch.nn.TransformerDecoder"):
            return self.stack(expr, frame, name)
        if qualified == "torch.nn.Parameter":
            return self.parameter(expr, frame)
        if qualified.startswith("torch.nn.") and qualified.count(".") == 2:
            return self.torch_layer(expr, qualified[len("torch.nn."):], frame)
        located = self.locate(qualified, frame.file)
        if located is None:
            raise _Unknown(expr, f"the class `{_code(expr.func)}` is not defined in this file or a module of its folder")
        return self.own_class(expr, *located, frame)

    def stack(self, call: cst.Call, frame: _Frame, name: str) -> _Sized:
        """nn.TransformerEncoder(layer, num_layers, norm=None): num_layers copies of the layer, and the norm."""
        found = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        found.update(zip(("layer", "num_layers", "norm"), (arg.value for arg in call.args if arg.keyword is None)))
        layer = found.get("encoder_layer", found.get("decoder_layer", found.get("layer")))
        if layer is None or "num_layers" not in found:
            raise _Unknown(call, f"`{_code(call.func)}` without its layer or num_layers")
        sized = _Sized()
        sized.add(self.built(layer, frame, name), self.number(found["num_layers"], frame))
        norm = found.get("norm")
        if norm is not None and spell(norm) != "None":
            sized.add(self.built(norm, frame, f"{name}.norm"))
        return sized

    def container(self, call: cst.Call, frame: _Frame, name: str) -> _Sized:
        """nn.Sequential(a, b, *[c for _ in range(n)]), nn.ModuleList([...])."""
        sized = _Sized()
        for position, arg in enumerate(call.args):
            for item, times in self.items(arg.value, frame, unpack=arg.star == "*" or _is_list(call, frame)):
                sized.add(self.module(item, frame, f"{name}[{position}]"), times)
        return sized

    def items(self, expr: cst.BaseExpression, frame: _Frame, unpack: bool) -> Iterator[tuple[cst.BaseExpression, int]]:
        """The modules a container argument holds, each with how many times it repeats."""
        if isinstance(expr, cst.Name) and expr.value in frame.lists:
            return  # a local list whose layers were counted as they were appended
        if not unpack:
            yield expr, 1
        elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            yield expr.elt, self.repeats(expr.for_in, frame)
        elif isinstance(expr, (cst.List, cst.Tuple)):
            for element in expr.elements:
                yield element.value, 1
        else:
            raise _Unknown(expr, f"`{_code(expr)}` is not a list this count can read")

    def repeats(self, loop: cst.CompFor | cst.For, frame: _Frame) -> int:
        """n for `for _ in range(n)` (or range(a, b)), whose variable the body does not read."""
        if isinstance(loop, cst.CompFor) and (loop.inner_for_in is not None or loop.ifs):
            raise _Unknown(loop, "a comprehension with several `for`s or an `if`")
        it = loop.iter
        if not (isinstance(it, cst.Call) and spell(it.func) == "range" and 1 <= len(it.args) <= 2):
            raise _Unknown(it, f"`{_code(it)}` is not `range(n)`")
        bounds = [self.number(arg.value, frame) for arg in it.args]
        return max(0, bounds[-1] - (bounds[0] if len(bounds) == 2 else 0))

    def parameter(self, call: cst.Call, frame: _Frame) -> _Sized:
        """nn.Parameter(torch.randn(a, b)) / torch.zeros((a, b)) / torch.ones(...) / torch.empty(...)."""
        inner = call.args[0].value if call.args else None
        makers = ("torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty", "torch.Tensor")
        if not isinstance(inner, cst.Call) or frame.file.index.qualify(inner.func) not in makers:
            raise _Unknown(call, "a parameter whose shape this count cannot read")
        shape: list[Value] = []
        for arg in inner.args:
            if arg.keyword is not None:
                continue
            found = self.value(arg.value, frame)
            shape += list(found) if isinstance(found, tuple) else [found]
        sizes = [n for n in shape if isinstance(n, int) and not isinstance(n, bool)]
        if len(sizes) != len(shape):
            raise _Unknown(call, "a parameter whose shape this count cannot read")
        count = math.prod(sizes)
        return _Sized(count, count)

    def torch_layer(self, call: cst.Call, kind: str, frame: _Frame) -> _Sized:
        """One of torch's layers, by its formula (a layer kind it does not know raises)."""
        if kind in NO_PARAMETERS or kind.endswith("Loss"):
            return _Sized()
        if kind not in SIGNATURES:
            raise _Unknown(call, f"`nn.{kind}` is a layer this count does not know")
        names, defaults = SIGNATURES[kind]
        found = _Arguments(defaults)
        for position, arg in enumerate(call.args):
            if arg.star:
                raise _Unknown(arg, "arguments unpacked with * or **")
            key = arg.keyword.value if arg.keyword is not None else (names[position] if position < len(names) else "")
            if key in names:
                try:
                    found[key] = self.value(arg.value, frame)
                except _Unknown as unknown:
                    found[key] = unknown  # raised only if the formula reads it (not `dropout=p`)
        missing = [name for name in names if name not in found]
        if missing:
            raise _Unknown(call, f"`nn.{kind}` without its `{missing[0]}`")
        try:
            return _Sized(*FORMULAS[kind](found))
        except (TypeError, ValueError, ZeroDivisionError) as error:
            raise _Unknown(call, f"`nn.{kind}`: {error}") from None

    def own_class(self, call: cst.Call, cls: cst.ClassDef, file: _File, frame: _Frame,
                  env: dict[str, Value | _Unknown] | None = None) -> _Sized:
        """A class of the script's: its `__init__` read with the call's arguments bound."""
        if frame.depth > MAX_DEPTH:
            raise _Unknown(call, "classes nested too deep")
        init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        inner = _Frame(file, {}, cls.name.value, init or cls, frame.depth + 1)
        if init is None:
            return self.base_class(cls, None, inner, frame)
        inner.env = self.arguments(call, init, frame, inner)
        sized = _Sized()
        own = _Sized()  # what the class holds itself (nn.Parameter): one "layer" for the largest
        self.block(list(init.body.body), inner, sized, own, frame)
        sized.total += own.total
        sized.largest = max(sized.largest, own.total)
        return sized

    def base_class(self, cls: cst.ClassDef, call: cst.Call | None, inner: _Frame, outer: _Frame) -> _Sized:
        """A class without `__init__`, or `super().__init__(...)`: the base class's of the script."""
        for base in cls.bases:
            located = self.locate(inner.file.index.qualify(base.value) or "", inner.file)
            if located is not None:
                built = call if call is not None else cst.Call(func=base.value)
                return self.own_class(built, *located, inner if call is not None else outer)
        return _Sized()

    def arguments(self, call: cst.Call, init: cst.FunctionDef, outer: _Frame,
                  inner: _Frame) -> dict[str, Value | _Unknown]:
        """The `__init__` parameters the call binds, then their defaults. One whose value is unknown (or
        that the call does not give) is bound to why: never read from another caller of the class."""
        params = [p for p in init.params.params if p.name.value != "self"] + list(init.params.kwonly_params)
        env: dict[str, Value | _Unknown] = {}
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        for param, arg in zip(init.params.params[1:], positional):
            self.bind(env, param.name.value, arg.value, outer)
        for arg in call.args:
            if arg.keyword is not None:
                self.bind(env, arg.keyword.value, arg.value, outer)
        for param in params:
            if param.name.value not in env and param.default is not None:
                self.bind(env, param.name.value, param.default, inner)
            elif param.name.value not in env:
                spread = any(arg.star for arg in call.args)
                env[param.name.value] = _Unknown(param, "handed in with * or **" if spread else "not given by the call")
        return env

    def bind(self, env: dict[str, Value | _Unknown], name: str, expr: cst.BaseExpression, frame: _Frame) -> None:
        try:
            env[name] = self.value(expr, frame)
        except _Unknown as unknown:
            env[name] = unknown  # raised only if a layer reads it (named_value)

    # -- which construction ----------------------------------------------------------------------

    def branch_taken(self, call: cst.Call, frame: _Frame) -> cst.Call:
        """`if name == "big": net = Big() / else: net = Small()`: the construction whose `if`s hold (a
        choice it cannot make keeps `call` and is named as unsized)."""
        index = frame.file.index
        choices = _alternatives(index, call)
        if len(choices) < 2:
            return call
        verdicts = [(choice, self.taken(statement, frame)) for choice, statement in choices]
        possible = [(choice, verdict) for choice, verdict in verdicts if verdict is not False]
        if len(possible) == 1:
            return possible[0][0]
        if any(verdict is None for _, verdict in possible):
            lines = ", ".join(str(frame.file.positions.of(choice, None)[0]) for choice, _ in possible)
            self.skip(frame, call, frame.owner, f"built by one of several calls (lines {lines}) under `if`s this count "
                                                "cannot decide; counted this one")
        return call

    def taken(self, stmt: cst.BaseStatement, frame: _Frame) -> bool | None:
        """Whether the `if`/`elif`/`else` branches around `stmt` run: None when a test is unknown."""
        index = frame.file.index
        earlier = {node.orelse: node for node in index.parent_of.values()
                   if isinstance(node, cst.If) and isinstance(node.orelse, cst.If)}
        node: cst.BaseStatement = stmt
        verdict: bool | None = True
        while (parent := index.parent_of.get(node)) is not None:
            if isinstance(parent, cst.If) and node is not parent.orelse:
                tests = [(parent.test, node in _statements(parent.body))]
                before = earlier.get(parent)
                while before is not None:
                    tests.append((before.test, False))
                    before = earlier.get(before)
                for test, wanted in tests:
                    try:
                        if bool(self.value(test, _Frame(frame.file, {}, frame.owner, parent))) != wanted:
                            return False
                    except _Unknown:
                        verdict = None
            node = parent
        return verdict

    # -- statements of __init__ ------------------------------------------------------------------

    def block(self, body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], frame: _Frame, sized: _Sized, own: _Sized,
              outer: _Frame) -> None:
        for stmt in body:
            frame.stmt = stmt
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    self.small(small, frame, sized, own, outer)
            elif isinstance(stmt, cst.For):
                self.loop(stmt, frame, sized, own, outer)
            elif isinstance(stmt, cst.If):
                self.branch(stmt, frame, sized, own, outer)

    def loop(self, stmt: cst.For, frame: _Frame, sized: _Sized, own: _Sized, outer: _Frame) -> None:
        try:
            times = self.repeats(stmt, frame)
        except _Unknown as unknown:
            self.skip(frame, stmt, f"{frame.owner}: the loop", unknown.why)
            return
        inside, inside_own = _Sized(), _Sized()
        self.block(list(stmt.body.body), frame, inside, inside_own, outer)
        sized.add(inside, times)
        own.add(inside_own, times)

    def branch(self, stmt: cst.If, frame: _Frame, sized: _Sized, own: _Sized, outer: _Frame) -> None:
        try:
            test = self.value(stmt.test, frame)
        except _Unknown as unknown:
            if _builds_layers(stmt):
                self.skip(frame, stmt, f"{frame.owner}: the `if {_code(stmt.test)}:`", unknown.why)
            return
        chosen = stmt.body if test else stmt.orelse
        if isinstance(chosen, cst.If):
            self.branch(chosen, frame, sized, own, outer)
        elif isinstance(chosen, cst.Else):
            self.block(_statements(chosen.body), frame, sized, own, outer)
        elif chosen is not None:
            self.block(_statements(chosen), frame, sized, own, outer)

    def small(self, small: cst.BaseSmallStatement, frame: _Frame, sized: _Sized, own: _Sized, outer: _Frame) -> None:
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            self.assign(spell(small.targets[0].target), small.value, frame, sized, own)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self.assign(spell(small.target), small.value, frame, sized, own)
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            self.called(small.value, frame, sized, outer)

    def assign(self, target: str | None, value: cst.BaseExpression, frame: _Frame, sized: _Sized, own: _Sized) -> None:
        if target is None:
            return
        frame.layers.pop(target, None)
        local = isinstance(value, cst.Name) and value.value in frame.layers
        if not local and not _makes_module(value, frame.file.index, self, frame.file):
            frame.env.pop(target, None)
            self.bind(frame.env, target, value, frame)
            return
        if "." not in target and not local:
            frame.layers[target] = value  # a local layer: counted where it is used (torch registers it there)
            return
        made = self.module(value, frame, f"{frame.owner}.{target.removeprefix('self.')}")
        (own if _is_parameter(value, frame.file.index) else sized).add(made)

    def called(self, call: cst.Call, frame: _Frame, sized: _Sized, outer: _Frame) -> None:
        """`self.layers.append(Layer())`, `super().__init__(...)`, `self.add_module("name", layer)`,
        `setattr(self, "name", layer)`."""
        func = call.func
        named = spell(func) in ("self.add_module", "self.register_module", "setattr") and len(call.args) >= 2
        if named and (spell(func) != "setattr" or spell(call.args[0].value) == "self"):
            sized.add(self.module(call.args[-1].value, frame, f"{frame.owner}.{_code(call.args[-2].value)}"))
            return
        if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend") and call.args:
            name = f"{frame.owner}.{_code(func.value).removeprefix('self.')}"
            try:
                items = list(self.items(call.args[0].value, frame, unpack=func.attr.value == "extend"))
            except _Unknown as unknown:
                self.skip(frame, unknown.node, name, unknown.why)
                return
            for item, times in items:
                sized.add(self.module(item, frame, name), times)
            if isinstance(func.value, cst.Name):
                frame.lists.add(func.value.value)  # `nn.Sequential(*blocks)` later adds nothing
        elif isinstance(func, cst.Attribute) and func.attr.value == "__init__" and _is_super(func.value):
            cls = frame.file.index.classes.get(frame.owner)
            if cls is not None:
                sized.add(self.base_class(cls, call, frame, outer))


def count_file(path: str) -> Count:
    """The parameters of the models the script at `path` trains. Raises InputError (naming `path`)
    when it cannot be read or parsed, or trains no model this count can find."""
    code = read(path).text
    return count_source(code, path)


def count_source(code: str, path: str) -> Count:
    """As count_file, for the script's text (`path` names it in messages and finds its folder's modules)."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError as error:
        raise InputError(path, error.raw_line, error.raw_column + 1, f"syntax error: {error.message}") from None
    sites = analyze(module)
    if not sites.models:
        why = "no backward pass" if not sites.backward_calls else "no model whose forward feeds backward was found"
        raise InputError(path, 0, 0, f"cannot count its parameters: {why}; give --params")
    index = sites.index
    script = _File(path, index, Positions(module, code), SourceFile(None, dict(index.classes), dict(index.imports), path))
    counter = _Counter(_Reader(os.path.dirname(os.path.abspath(path))), {path: script})
    total = _Sized()
    for site in sites.models:
        call = model_class_call(index, site)
        stmt = site.wrap_after or site.wrap_before or module
        frame = _Frame(script, {}, site.spelling, stmt)
        if call is None:
            counter.skip(frame, stmt, site.spelling, "not built by a call this file shows")
            continue
        frame.stmt = _statement_of(index, call) or stmt
        call = counter.branch_taken(call, frame)
        frame.stmt = _statement_of(index, call) or stmt
        total.add(counter.module(call, frame, site.spelling))
    return Count(total.total, total.largest, tuple(s.spelling for s in sites.models), tuple(counter.unsized))


# -- helpers ----------------------------------------------------------------------------------------

def _code(node: cst.CSTNode) -> str:
    text = cst.Module([]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _unary(expr: cst.UnaryOperation, operand: Value) -> Value:
    if isinstance(expr.operator, cst.Minus) and isinstance(operand, (int, float)):
        return -operand
    if isinstance(expr.operator, cst.Not):
        return not operand
    if isinstance(expr.operator, cst.Plus) and isinstance(operand, (int, float)):
        return operand
    raise _Unknown(expr, f"`{_code(expr)}` is not a value this count can read")


# two numbers, or two strings or tuples for `+` (_binary checks): what the lambdas are handed
BINARY: dict[type[cst.BaseBinaryOp], Callable[[Any, Any], Value]] = {
    cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b, cst.Multiply: lambda a, b: a * b,
    cst.Divide: lambda a, b: a / b, cst.FloorDivide: lambda a, b: a // b, cst.Modulo: lambda a, b: a % b,
    cst.Power: lambda a, b: a ** b}


def _binary(expr: cst.BinaryOperation, left: Value, right: Value) -> Value:
    operation = BINARY.get(type(expr.operator))
    numbers = all(isinstance(v, (int, float)) for v in (left, right))
    if operation is None or not numbers and not isinstance(expr.operator, cst.Add):
        raise _Unknown(expr, f"`{_code(expr)}` is not a value this count can read")
    # `numbers` holds for a power: right is an int or float
    if isinstance(expr.operator, cst.Power) and isinstance(right, (int, float)) and abs(right) > 64:
        raise _Unknown(expr, f"`{_code(expr)}` is too large")
    try:
        return operation(left, right)
    except (TypeError, ZeroDivisionError, OverflowError) as error:
        raise _Unknown(expr, str(error)) from None


COMPARE: dict[type[cst.BaseCompOp], Callable[[Any, Any], bool]] = {
    cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b, cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b, cst.GreaterThan: lambda a, b: a > b,
    cst.GreaterThanEqual: lambda a, b: a >= b, cst.Is: lambda a, b: a == b and type(a) is type(b),
    cst.IsNot: lambda a, b: not (a == b and type(a) is type(b)),
    cst.In: lambda a, b: a in _members(b), cst.NotIn: lambda a, b: a not in _members(b)}
MAX_ITEMS = 100_000  # the longest sequence a count builds (`range(n)` in a comprehension)


def _members(value: Value) -> tuple[Value, ...] | str:
    if isinstance(value, Mapping):
        return value.keys()
    if isinstance(value, (tuple, str)):
        return value
    raise TypeError(f"{value!r} is not a container")


def _sequence(node: cst.CSTNode, value: Value) -> tuple[Value, ...] | str:
    """What `for x in value` walks (a dict: its keys)."""
    try:
        return _members(value)
    except TypeError as error:
        raise _Unknown(node, str(error)) from None


def _as_mapping(node: cst.CSTNode, value: Value) -> Mapping:
    if not isinstance(value, Mapping):
        raise _Unknown(node, f"`{_code(node)}` is not a dict this count can read")
    return value


def _unpacked(target: cst.BaseExpression, item: Value) -> dict[str, Value]:
    """The names a comprehension's `for i, (a, b) in ...` binds for one item."""
    if isinstance(target, cst.Name):
        return {target.value: item}
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(item, tuple) and not isinstance(item, Mapping) \
            and len(item) == len(target.elements):
        bound: dict[str, Value] = {}
        for element, part in zip(target.elements, item):
            bound.update(_unpacked(element.value, part))
        return bound
    raise _Unknown(target, f"`{_code(target)}` is not a target this count can read")


def _subscript(expr: cst.Subscript, container: Value, key: Value) -> Value:
    """`cfg["emb_dim"]`, `sizes[0]`, `"abc"[1]`."""
    try:
        if isinstance(container, Mapping):
            return container.get_item(key)
        if isinstance(container, (tuple, str)) and isinstance(key, int) and not isinstance(key, bool):
            return container[key]
    except (KeyError, IndexError):
        raise _Unknown(expr, f"`{_code(expr)}`: no such key or index") from None
    raise _Unknown(expr, f"`{_code(expr)}` is not a value this count can read")


def _range(*bounds: int) -> tuple[int, ...]:
    found = range(*bounds)
    if len(found) > MAX_ITEMS:
        raise ValueError(f"range of {len(found)} is too long to walk")
    return tuple(found)


def _walked(function: Callable[[Any], Iterable[Value]]) -> Callable[..., tuple[Value, ...]]:
    """A builtin that walks a sequence (a dict: its keys), returning a tuple."""
    def call(value: Value, *rest: Value) -> tuple[Value, ...]:
        items = value.keys() if isinstance(value, Mapping) else value
        if not isinstance(items, (tuple, str)) or rest:
            raise TypeError(f"{value!r} is not a sequence")
        return tuple(function(items))
    return call


# the builtins a count calls: each takes Values (a wrong one raises TypeError) and returns a Value
FUNCTIONS: dict[str, Callable[..., Value]] = {
    "len": len, "min": min, "max": max, "int": int, "abs": abs, "round": round, "sum": sum,
    "math.prod": math.prod, "math.ceil": math.ceil, "math.floor": math.floor,
    "list": _walked(list), "tuple": _walked(tuple), "sorted": _walked(sorted), "enumerate": _walked(enumerate),
    "set": _walked(dict.fromkeys), "reversed": _walked(reversed)}


def _unmoved(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`Net()` for `Net().to(device)`, `Net().cuda()`, `Net().float()`."""
    while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
           and expr.func.attr.value in ("to", "cuda", "cpu", "float", "half", "bfloat16", "double", "train", "eval")
           and isinstance(expr.func.value, cst.Call)):
        expr = expr.func.value
    return expr


def _is_list(call: cst.Call, frame: _Frame) -> bool:
    """nn.ModuleList's one argument is a list of modules."""
    return (frame.file.index.qualify(call.func) or "") == "torch.nn.ModuleList"


def _is_parameter(value: cst.BaseExpression, index: ScriptIndex) -> bool:
    return isinstance(value, cst.Call) and index.qualify(value.func) == "torch.nn.Parameter"


def _makes_module(value: cst.BaseExpression, index: ScriptIndex, counter: _Counter, file: _File) -> bool:
    """A call of torch.nn's, of a class of the script's or its folder's, or of another class (capitalised,
    not torch's: a layer this count cannot read, named as unsized): a layer, not a number."""
    value = _unmoved(value)
    if not isinstance(value, cst.Call):
        return False
    qualified = index.qualify(value.func) or ""
    looks_like_a_class = qualified.rsplit(".", 1)[-1][:1].isupper() and not qualified.startswith("torch.")
    return qualified.startswith("torch.nn.") or looks_like_a_class or counter.locate(qualified, file) is not None


def _builds_layers(stmt: cst.CSTNode) -> bool:
    """Whether a statement holds a call that could build a layer (a capitalised name, or nn.*)."""
    for node in descendants(stmt):
        if isinstance(node, cst.Call):
            name = (spell(node.func) or "").rsplit(".", 1)[-1]
            if name[:1].isupper() or name == "append":
                return True
    return False


def _statements(suite: cst.BaseSuite) -> list[cst.BaseStatement]:
    """The statements of an indented block, or of `if x: a; b` on one line (as one statement line)."""
    if isinstance(suite, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=suite.body)]
    assert isinstance(suite, cst.IndentedBlock)  # the other kind of suite
    return list(suite.body)


def _is_super(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and spell(node.func) == "super"


def _statements_of(index: ScriptIndex, scope: Scope) -> list[cst.BaseStatement]:
    """A statement of `scope` (positions and scope lookups start from one)."""
    return [stmt for stmt, owner in index.scope_of.items() if owner is scope][:1]


def _alternatives(index: ScriptIndex, call: cst.Call) -> list[tuple[cst.Call, cst.BaseStatement]]:
    """The calls that build the name `call` is bound to, in its scope (each with its statement):
    `net = Big()` and `net = Small()` in the branches of an `if`, not `net = DDP(net)`."""
    bound = next((b for b in index.bindings if b.value is not None and _unmoved(b.value) is call), None)
    if bound is None:
        return []
    found = []
    for binding in index.bindings_of_in(bound.target, bound.place.scope):
        value = _unmoved(binding.value) if binding.value is not None else None
        wraps = isinstance(value, cst.Call) and any(spell(arg.value) == bound.target for arg in value.args)
        name = (spell(value.func) or "") if isinstance(value, cst.Call) else ""
        if isinstance(value, cst.Call) and not wraps and name.rsplit(".", 1)[-1][:1].isupper():
            found.append((value, binding.place.stmt))
    return found


def _statement_of(index: ScriptIndex, call: cst.Call) -> cst.BaseStatement | None:
    """The statement of the script that holds `call`."""
    site = index.call_site(call)
    return site.place.stmt if site is not None else None


# -- torch's layers ---------------------------------------------------------------------------------
# Each: the parameters its formula reads, in torch's order (what a positional argument binds), with
# their defaults; the formula gives (parameters, the most one module of it holds itself).

NO_PARAMETERS = frozenset("""ReLU ReLU6 GELU SiLU Mish Tanh Sigmoid Softmax LogSoftmax Softplus ELU SELU CELU
LeakyReLU Hardtanh Hardswish Hardsigmoid Tanhshrink Softsign Threshold GLU Identity Flatten Unflatten Dropout
Dropout1d Dropout2d Dropout3d AlphaDropout MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d
AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d
Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle ZeroPad2d ConstantPad1d
ConstantPad2d ReflectionPad1d ReflectionPad2d ReplicationPad2d CosineSimilarity PairwiseDistance
ChannelShuffle""".split())


def _size(value: Value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a size")
    return value


def _shape(value: Value) -> list[int]:
    return [_size(v) for v in value] if isinstance(value, tuple) else [_size(value)]


def _kernel(value: Value, dims: int) -> int:
    sizes = _shape(value)
    return math.prod(sizes) if len(sizes) > 1 else sizes[0] ** dims


def _linear(a: _Read) -> tuple[int, int]:
    n = _size(a["in_features"]) * _size(a["out_features"]) + (_size(a["out_features"]) if a["bias"] else 0)
    return n, n


def _bilinear(a: _Read) -> tuple[int, int]:
    out = _size(a["out_features"])
    n = out * _size(a["in1_features"]) * _size(a["in2_features"]) + (out if a["bias"] else 0)
    return n, n


Formula = Callable[[_Read], tuple[int, int]]  # (parameters, the most one module of it holds itself)


def _conv(dims: int, transposed: bool) -> Formula:
    def formula(a: _Read) -> tuple[int, int]:
        inputs, outputs, groups = _size(a["in_channels"]), _size(a["out_channels"]), _size(a["groups"])
        per = inputs * (outputs // groups) if transposed else outputs * (inputs // groups)
        n = per * _kernel(a["kernel_size"], dims) + (outputs if a["bias"] else 0)
        return n, n
    return formula


def _embedding(a: _Read) -> tuple[int, int]:
    n = _size(a["num_embeddings"]) * _size(a["embedding_dim"])
    return n, n


def _layer_norm(a: _Read) -> tuple[int, int]:
    size = math.prod(_shape(a["normalized_shape"]))
    n = (size + (size if a["bias"] else 0)) if a["elementwise_affine"] else 0
    return n, n


def _norm(channels: str, affine: str) -> Formula:
    def formula(a: _Read) -> tuple[int, int]:
        n = 2 * _size(a[channels]) if a[affine] else 0
        return n, n
    return formula


def _recurrent(gates: int) -> Formula:
    def formula(a: _Read) -> tuple[int, int]:
        if a["proj_size"]:
            raise ValueError("proj_size is not counted")
        inputs, hidden, layers = _size(a["input_size"]), _size(a["hidden_size"]), _size(a["num_layers"])
        directions = 2 if a["bidirectional"] else 1
        total = 0
        for layer in range(layers):
            width = inputs if layer == 0 else hidden * directions
            total += directions * (gates * hidden * (width + hidden) + (2 * gates * hidden if a["bias"] else 0))
        return total, total
    return formula


def _attention(a: _Read) -> tuple[int, int]:
    embed = _size(a["embed_dim"])
    kdim = embed if a["kdim"] is None else _size(a["kdim"])
    vdim = embed if a["vdim"] is None else _size(a["vdim"])
    inputs = embed * (embed + kdim + vdim) + (3 * embed if a["bias"] else 0) + (2 * embed if a["add_bias_kv"] else 0)
    output = embed * embed + (embed if a["bias"] else 0)
    return inputs + output, max(inputs, output)


def _transformer_layer(decoder: bool) -> Formula:
    def formula(a: _Read) -> tuple[int, int]:
        d, ff, bias = _size(a["d_model"]), _size(a["dim_feedforward"]), bool(a["bias"])
        attention = _attention({"embed_dim": d, "kdim": None, "vdim": None, "bias": bias, "add_bias_kv": False})
        feed_forward = [d * ff + (ff if bias else 0), ff * d + (d if bias else 0)]
        norms = (3 if decoder else 2) * (2 * d if bias else d)
        attentions = 2 if decoder else 1
        total = attentions * attention[0] + sum(feed_forward) + norms
        return total, max(attention[1], *feed_forward)
    return formula


CONV = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias")
CONV_T = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias")
RNN = ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size")
RNN_DEFAULTS: dict[str, Value] = {"num_layers": 1, "bias": True, "batch_first": False, "dropout": 0.0,
                                  "bidirectional": False, "proj_size": 0}
NORM = ("num_features", "eps", "momentum", "affine")
CONV_DEFAULTS: dict[str, Value] = {"stride": 1, "padding": 0, "output_padding": 0, "dilation": 1, "groups": 1,
                                   "bias": True}
SIGNATURES: dict[str, tuple[tuple[str, ...], dict[str, Value]]] = {
    "Linear": (("in_features", "out_features", "bias"), {"bias": True}),
    "Bilinear": (("in1_features", "in2_features", "out_features", "bias"), {"bias": True}),
    **{f"Conv{d}d": (CONV, CONV_DEFAULTS) for d in (1, 2, 3)},
    **{f"ConvTranspose{d}d": (CONV_T, CONV_DEFAULTS) for d in (1, 2, 3)},
    "Embedding": (("num_embeddings", "embedding_dim"), {}),
    "LayerNorm": (("normalized_shape", "eps", "elementwise_affine", "bias"), {"eps": 1e-5, "elementwise_affine": True,
                                                                            "bias": True}),
    **{f"BatchNorm{d}d": (NORM, {"eps": 1e-5, "momentum": 0.1, "affine": True}) for d in (1, 2, 3)},
    **{f"InstanceNorm{d}d": (NORM, {"eps": 1e-5, "momentum": 0.1, "affine": False}) for d in (1, 2, 3)},
    "GroupNorm": (("num_groups", "num_channels", "eps", "affine"), {"eps": 1e-5, "affine": True}),
    "PReLU": (("num_parameters",), {"num_parameters": 1}),
    "LSTM": (RNN, RNN_DEFAULTS), "GRU": (RNN, RNN_DEFAULTS), "RNN": (RNN[:2] + ("num_layers", "nonlinearity") + RNN[3:],
                                                                   {**RNN_DEFAULTS, "nonlinearity": "tanh"}),
    "MultiheadAttention": (("embed_dim", "num_heads", "dropout", "bias", "add_bias_kv", "add_zero_attn", "kdim", "vdim"),
                           {"dropout": 0.0, "bias": True, "add_bias_kv": False, "add_zero_attn": False, "kdim": None,
                            "vdim": None}),
    **{f"Transformer{part}Layer": (("d_model", "nhead", "dim_feedforward", "dropout", "activation",
                                    "layer_norm_eps", "batch_first", "norm_first", "bias"),
                                   {"dim_feedforward": 2048, "dropout": 0.1, "activation": "relu",
                                    "layer_norm_eps": 1e-5, "batch_first": False, "norm_first": False, "bias": True})
       for part in ("Encoder", "Decoder")},
}
FORMULAS = {
    "Linear": _linear, "Bilinear": _bilinear,
    **{f"Conv{d}d": _conv(d, False) for d in (1, 2, 3)},
    **{f"ConvTranspose{d}d": _conv(d, True) for d in (1, 2, 3)},
    "Embedding": _embedding, "LayerNorm": _layer_norm,
    **{f"BatchNorm{d}d": _norm("num_features", "affine") for d in (1, 2, 3)},
    **{f"InstanceNorm{d}d": _norm("num_features", "affine") for d in (1, 2, 3)},
    "GroupNorm": _norm("num_channels", "affine"),
    "PReLU": lambda a: (_size(a["num_parameters"]),) * 2,
    "LSTM": _recurrent(4), "GRU": _recurrent(3), "RNN": _recurrent(1),
    "MultiheadAttention": _attention,
    "TransformerEncoderLayer": _transformer_layer(False), "TransformerDecoderLayer": _transformer_layer(True),
}
