"""What a wrapper that takes the parameters as they are when it is built (DDP) needs to know about
a model's gradients, as far as this file shows. DDP registers the parameters that require a
gradient when it is built, on their device and in their dtype, and (without
`find_unused_parameters`) waits in every step for a gradient of each one: a step that leaves one
without fails the next ("Expected to have finished reduction in the prior iteration"), and a
parameter made trainable after the wrap is never averaged.

`gradient_gaps` lists the parameters that may get no gradient in a step. Seen, in the forward()
of the model's class, of the classes of this file it builds (its submodules, a few levels down),
and in the methods of their own that these call (and those the training code calls on the model):
- a part with parameters (a torch.nn layer other than activations, pooling, dropout and the like,
  a module class of this file that builds one, an `nn.Parameter`) whose every use runs under
  `torch.no_grad()` / `inference_mode()` / `set_grad_enabled(False)`, is detached
  (`self.embed(x).detach()`: the use itself under the `.detach()`), or runs only under an `if`
  (or `a if c else b`) whose test reads an argument of the method (not a tensor's `is_cuda`,
  `device` or `dtype`), a name bound from one, a random draw, or `self.training` (its `else`, or
  `not self.training`);
- a part that these methods never read, in a class that does not walk its own modules
  (`self.children()`, `self.parameters()`, `getattr(self, ...)`, `super().forward`) and whose
  attribute no code outside the class reads;
- in the training code, gradients of a part of the model switched off after the wrap
  (`if epoch == k: for p in model.backbone.parameters(): p.requires_grad = False`, also through
  a function of this file handed the part, `freeze(model.backbone)`).
A part frozen where it is built is no gap: DDP leaves out what does not require a gradient then.
Nor is the whole model switched off for a step (a GAN's critic while the generator learns): DDP
gets no gradient of it at all in that step, and waits for none.

The model's class may also be defined in a module of the script's folder that the script imports
(`from nets import Net`, `import models` then `models.Net()`, through a package's re-export),
read through the conversion's `ReadModule` (migrate.project finds the module): that module's
classes are searched the same way, and each gap there names its file and line (`nets.py line 13`).

Not seen: classes of yet other modules (a part whose class that module imports), a name detached
after it is bound (`h = self.embed(x)`, then `h.detach()`), a forward that returns early under a condition, loops over a varying number of
layers, conditions on the script's own settings (`if self.use_aux:`), which are fixed for a run.

`last_change` finds the last statement before training that still changes the model's parameters
(DDP goes after it). `late_change` finds what DDP cannot follow after the wrap: a cast or move of
the model inside the first statement of the wrap's block that trains, or gradients switched on
after the wrap (`True`, or a value such as `epoch >= k`) when some parameter was frozen when DDP
was built. `wholly_frozen` finds a model with nothing to train (a loop over `model[0].parameters()`
freezes that part only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.divergence import base_spelling
from migrate.analysis.homes import home_binding
from migrate.analysis.index import AttributeUse, Binding, Scope, ScriptIndex, build_index, child_nodes, descendants, spell
from migrate.analysis.models import (
    Switch,
    aliases,
    is_after,
    model_cast,
    replaces_part,
    changes_parameters,
    requires_grad_switches,
)
from migrate.analysis.positions import Positions
from migrate.analysis.sites import ModelSite
from migrate.analysis.syntax import calls_in
from migrate.analysis.trained import constructed_class, is_module_class, parameter_free
from migrate.analysis.upstream import model_class_call
from migrate.project import defining_module, project_graph
from migrate.project_files import ReadModule, read_nothing

# torch.nn layers that hold no parameters: what runs them needs no gradient
PARAMETER_FREE = frozenset({
    "ReLU", "ReLU6", "LeakyReLU", "GELU", "SiLU", "Mish", "ELU", "SELU", "CELU", "Sigmoid", "Tanh", "Softmax",
    "Softmax2d", "Softmin", "LogSoftmax", "LogSigmoid", "Softplus", "Softsign", "Softshrink", "Hardshrink", "Hardtanh",
    "Hardswish", "Hardsigmoid", "Tanhshrink", "Threshold", "GLU", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
    "AlphaDropout", "FeatureAlphaDropout", "Identity", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d",
    "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "Upsample",
    "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "ZeroPad1d",
    "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
    "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d",
    "CosineSimilarity", "PairwiseDistance", "Fold", "Unfold",
})
PARAMETER = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad")
SET_GRAD_ENABLED = ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled")
DETACH = ("detach", "detach_")
# a tensor argument's facts that stay the same for a whole run
FIXED_FACTS = frozenset({"is_cuda", "device", "dtype", "is_sparse", "layout"})
RANDOM = ("random.", "numpy.random.", "np.random.", "torch.rand", "torch.bernoulli", "torch.multinomial", "torch.randint")
# calls by which a class reaches all of its parts without naming them
WALKS = frozenset({"children", "named_children", "modules", "named_modules", "parameters", "named_parameters",
                   "_modules", "_parameters", "__dict__", "apply"})
MAX_DEPTH = 4
IMPORT_DEPTH = 3  # imports followed from the script to the module that defines the model's class


@dataclass(frozen=True)
class Gap:
    """Parameters that may get no gradient in a step, and why, in the script's words."""

    what: str  # "`model.backbone`", "`model.encoder.embed`"
    why: str  # "runs only under `torch.no_grad()` in `Classifier.forward()`"
    node: cst.CSTNode  # where it is seen (its line goes into the message)
    place: str | None = None  # "nets.py line 13" for a node of another module than the script


@dataclass(frozen=True)
class _Part:
    """A submodule or parameter a class builds in __init__: `self.encoder = Encoder(...)`."""

    attribute: str
    node: cst.CSTNode
    cls: str | None  # a module class of this file it is an instance of


def gradient_gaps(index: ScriptIndex, site: ModelSite, training: set[str], path: str = "train.py",
                  read: ReadModule = read_nothing) -> list[Gap]:
    """The parameters of the wrapped model that may get no gradient in some step (see the module
    docstring); `path` is the script's, whose folder's modules `read` returns."""
    gaps = _model_class_gaps(index, site, training, path, read)
    whole = _whole_model_switches(index, site)
    for switch in _script_switches(index, site):
        # the whole model switched off for a step (a GAN's critic while the generator learns) gives
        # DDP no gradient at all in that step, which it takes; only a part switched off leaves it waiting
        if switch.on is not True and is_after(index, switch.stmt, site) and id(switch) not in whole:
            who = f"`{switch.owner}`" if _switches_itself(switch) else f"a part of `{switch.owner}`"  # `model[0]`
            gaps.append(Gap(who, "has its gradients switched off during training, after the wrap", switch.node))
    return gaps


def last_change(index: ScriptIndex, site: ModelSite, backward: list[cst.Call], training: set[str]) -> cst.BaseStatement | None:
    """The last statement of the wrap's block, from the wrap on and before the first statement that
    trains (runs a backward or calls a function that does), that still casts, moves, freezes or
    otherwise changes the model's parameters (`model = torch.compile(model)`, then
    `model.to(device).to(torch.bfloat16)`; `print(model)`, then `model.cuda()`); None when none does.
    DDP goes after it: what runs in between (a print, a compile, a forward to check shapes) needs no
    wrapper, and the wrapper must see the parameters as they train."""
    anchor = site.wrap_after or site.wrap_before
    assert anchor is not None
    block, position = index.block_of[anchor]
    names = _names_in_site_scope(index, site)
    short = {name.rsplit(".", 1)[-1] for name in training}
    found: cst.BaseStatement | None = None
    for stmt in block.body[position + (1 if site.wrap_after is not None else 0):]:
        if _trains(index, stmt, backward, short):
            break
        if changes_parameters(index, stmt, names):
            found = stmt
    return found


@dataclass(frozen=True)
class LateChange:
    """A change to the model after the wrap that DDP cannot follow."""

    node: cst.CSTNode  # the cast, or the switch
    cast: bool  # True: a cast or move; False: gradients switched back on
    owner: str  # what it changes: `model`, `model.encoder`
    training: cst.BaseStatement | None  # a cast: the statement of the wrap's block that trains, around it


def late_change(index: ScriptIndex, site: ModelSite, backward: list[cst.Call], training: set[str]) -> LateChange | None:
    """What changes the model after the wrap in a way DDP cannot follow: a cast or a move inside the
    first statement of the wrap's block that trains (`if epoch == 3: model.half()`; one after
    training is left alone: `torch.save(model.to("cpu"), ...)`), or a `requires_grad` switch after
    the wrap that may turn gradients on (`True`, or a value such as `epoch >= k`) when some
    parameter did not require a gradient when DDP was built."""
    anchor = site.wrap_after or site.wrap_before
    assert anchor is not None
    block, position = index.block_of[anchor]
    names = _names_in_site_scope(index, site)
    short = {name.rsplit(".", 1)[-1] for name in training}
    for stmt in block.body[position + (1 if site.wrap_after is not None else 0):]:
        cast = model_cast(index, stmt, names)
        if cast is not None:
            return LateChange(cast, True, site.spelling, stmt)
        if _trains(index, stmt, backward, short):
            break
    switches = _script_switches(index, site)
    if not _frozen_at_wrap(index, site, switches):
        return None  # every parameter was in DDP's buckets when it was built: switching it back on is no change
    for switch in switches:
        if switch.on is not False and is_after(index, switch.stmt, site):
            return LateChange(switch.node, False, switch.owner, None)
    return None


def _frozen_at_wrap(index: ScriptIndex, site: ModelSite, switches: list[Switch]) -> bool:
    """Some parameter of the model does not require a gradient when it is wrapped: a switch before
    the wrap, a part its class freezes, or the model built frozen (`Net().requires_grad_(False)`)."""
    if any(s.on is not True and not is_after(index, s.stmt, site) for s in switches):
        return True
    binding = home_binding(index, site.spelling, site.scope)
    if binding is not None and isinstance(binding.value, cst.Call) and _freezes_all(binding.value):
        return True
    cls = constructed_class(index, binding)
    return cls is not None and any(s.on is not True for s in requires_grad_switches(index, index.classes[cls], {"self"}))


def wholly_frozen(index: ScriptIndex, site: ModelSite) -> cst.CSTNode | None:
    """Where every parameter of the model is frozen before the wrap (`model.requires_grad_(False)`,
    a loop over `model.parameters()` setting `requires_grad = False`, or `Net().requires_grad_(False)`
    where it is built; not a part reached by an index, `model[0].parameters()`), when nothing after
    it and before the wrap makes a part trainable again or builds a new one; None otherwise."""
    anchor = site.wrap_after or site.wrap_before
    assert anchor is not None
    block, end = index.block_of[anchor]
    binding = home_binding(index, site.spelling, site.scope)
    frozen: cst.CSTNode | None = None
    if binding is not None and isinstance(binding.value, cst.Call) and _freezes_all(binding.value):
        frozen = binding.value
    for stmt in block.body[: end + (1 if site.wrap_after is not None else 0)]:
        if binding is None or index.statement_order()[stmt] <= index.statement_order()[binding.place.stmt]:
            continue  # before the model is built
        switches = requires_grad_switches(index, stmt, {site.spelling})
        if frozen is None:
            frozen = next((s.node for s in switches
                           if s.owner == site.spelling and s.on is False and _switches_itself(s)), None)
        elif replaces_part(stmt, site.spelling) or any(s.on is not False for s in switches) or _hands_over(index, stmt, site.spelling):
            return None
    return frozen


# -- the model's classes ---------------------------------------------------------------------------


def _model_class_gaps(index: ScriptIndex, site: ModelSite, training: set[str], path: str, read: ReadModule) -> list[Gap]:
    """The gaps of the model's class: one of the script's, else one of a module of its folder."""
    cls = constructed_class(index, home_binding(index, site.spelling, site.scope))
    sibling = None if cls is not None else _sibling_class(index, site, path, read)
    if cls is None and sibling is None:
        return []
    names = aliases(index, site)
    called = {u.node.attr.value for u in index.attributes
              if u.called and (u.owner, u.place.scope.name) in names and u.place.scope.name in training}
    frozen = {s.owner.split(".", 1)[1] for s in _script_switches(index, site) if s.on is False and "." in s.owner}
    prefix = f"{site.spelling}."
    if cls is not None:
        return _class_gaps(index, cls, called, frozen, prefix, 0, {cls})
    assert sibling is not None
    # the script's own reads of an attribute (`model.aux_head(...)`) count as reads outside the class
    script_reads = frozenset(u.node.attr.value for u in index.attributes)
    gaps = _class_gaps(sibling.index, sibling.name, called, frozen, prefix, 0, {sibling.name}, script_reads)
    return [sibling.placed(gap, path) for gap in gaps]


@dataclass(frozen=True)
class _SiblingClass:
    """The model's class as a module of the script's folder defines it, with that module parsed."""

    index: ScriptIndex
    name: str
    path: str
    text: str

    def placed(self, gap: Gap, script: str) -> Gap:
        """The gap with its file (as seen from the script's folder) and line in the message."""
        shown = os.path.relpath(self.path, os.path.dirname(script) or os.curdir)
        try:
            line = Positions(self.index.module, self.text).of(gap.node, self.index.statement_holding(gap.node))[0]
        except (SyntaxError, ValueError):  # libcst took what `ast` refuses: the file without its line
            return Gap(gap.what, gap.why, gap.node, shown)
        return Gap(gap.what, gap.why, gap.node, f"{shown} line {line}" if line else shown)


def _sibling_class(index: ScriptIndex, site: ModelSite, path: str, read: ReadModule) -> _SiblingClass | None:
    """The class that builds the model when the script imports it from a module of its folder
    (`from nets import Net`, `models.Net()`), read through `read`; None otherwise."""
    built = model_class_call(index, site) if read is not read_nothing else None
    spelled = spell(built.func) if built is not None else None
    if built is None or spelled is None or spelled.split(".")[0] not in index.imports:
        return None
    module, _, name = (index.qualify(built.func) or "").rpartition(".")
    if not module or module.split(".")[0] in ("torch", "torchvision", "transformers", "timm"):
        return None
    graph = project_graph(path, read, index.module.code, depth=IMPORT_DEPTH)
    link = next((each for each in graph.links_from(graph.script) if each.dotted == module.lstrip(".")), None)
    if link is None:
        return None
    found = _parsed_class(link.module, name, read)
    if found is None:
        defining = defining_module(graph, link.module, name, read)  # re-exported: `from .gpt import Net`
        found = _parsed_class(defining, name, read) if defining is not None else None
    return found


def _parsed_class(path: str, name: str, read: ReadModule) -> _SiblingClass | None:
    """The module at `path`, indexed, when it defines a module class `name` at its top level."""
    text = read(path)
    if text is None:
        return None
    try:
        index = build_index(cst.parse_module(text))
    except (cst.ParserSyntaxError, RecursionError):
        return None
    if name not in index.classes or not is_module_class(index, name):
        return None
    return _SiblingClass(index, name, path, text)


def _class_gaps(index: ScriptIndex, cls: str, extra: set[str], frozen: set[str], prefix: str, depth: int,
                seen: set[str], read_elsewhere: frozenset[str] = frozenset()) -> list[Gap]:
    """The gaps of one class of this file, and of the classes of this file its parts are
    (`read_elsewhere`: attributes another file reads, when the class is not the script's)."""
    methods = _reached_methods(index, cls, {"forward"} | extra)
    if f"{cls}.forward" not in index.functions:
        return []  # an inherited forward() is not read
    frozen = frozen | _frozen_in_class(index, cls)
    walks = _walks_own_parts(index, methods)
    gaps: list[Gap] = []
    for part in _parts(index, cls):
        if part.attribute in frozen:
            continue
        uses = [u for m in methods for u in _attributes_in(index, m) if u.owner == "self" and u.node.attr.value == part.attribute]
        if not uses:
            if not walks and part.attribute not in read_elsewhere and not _read_outside(index, cls, part.attribute):
                gaps.append(Gap(f"`{prefix}{part.attribute}`", f"is never used by `{cls}.forward()`", part.node))
            continue
        verdicts = [_without_gradient(index, use) for use in uses]
        known = [v for v in verdicts if v is not None]
        if len(known) == len(verdicts):
            why, where = known[0]
            gaps.append(Gap(f"`{prefix}{part.attribute}`", why, where))
        elif part.cls is not None and depth < MAX_DEPTH and part.cls not in seen:
            called = {u.node.attr.value for m in methods for u in _attributes_in(index, m)
                      if u.owner == f"self.{part.attribute}" and u.called}
            inner_frozen = {f.removeprefix(part.attribute + ".") for f in frozen if f.startswith(part.attribute + ".")}
            gaps += _class_gaps(index, part.cls, called, inner_frozen, f"{prefix}{part.attribute}.", depth + 1,
                                seen | {part.cls}, read_elsewhere)
    return gaps


def _reached_methods(index: ScriptIndex, cls: str, names: set[str]) -> list[Scope]:
    """The methods named, and the methods of the class they call as `self.m(...)`, transitively."""
    found: list[Scope] = []
    todo = [index.functions[f"{cls}.{n}"] for n in sorted(names) if f"{cls}.{n}" in index.functions]
    while todo:
        scope = todo.pop()
        if any(scope is f for f in found):
            continue
        found.append(scope)
        for use in _attributes_in(index, scope):
            if use.owner == "self" and use.called and f"{cls}.{use.node.attr.value}" in index.functions:
                todo.append(index.functions[f"{cls}.{use.node.attr.value}"])
    return found


def _attributes_in(index: ScriptIndex, scope: Scope) -> list[AttributeUse]:
    """The attribute uses of one scope (grouped once per script)."""
    by_scope: dict[int, list[AttributeUse]] = index.derived("attributes_by_scope", lambda: _grouped_by_scope(index))
    return by_scope.get(id(scope), [])


def _grouped_by_scope(index: ScriptIndex) -> dict[int, list[AttributeUse]]:
    grouped: dict[int, list[AttributeUse]] = {}
    for use in index.attributes:
        grouped.setdefault(id(use.place.scope), []).append(use)
    return grouped


def _parts(index: ScriptIndex, cls: str) -> list[_Part]:
    """What `__init__` assigns to `self.x` that holds parameters."""
    init = index.functions.get(f"{cls}.__init__")
    if init is None:
        return []
    parts: dict[str, _Part] = {}
    for binding in index.bindings_in(init):
        attribute = binding.target.removeprefix("self.")
        if not binding.target.startswith("self.") or "." in attribute or not isinstance(binding.value, cst.Call):
            continue
        held = _holds_parameters(index, binding.value, binding)
        if held is not False and attribute not in parts:
            parts[attribute] = _Part(attribute, binding.node, held if isinstance(held, str) else None)
    return list(parts.values())


def _holds_parameters(index: ScriptIndex, value: cst.Call, binding: Binding) -> bool | str:
    """False when the value holds no parameter that trains, a class name of this file for its
    instance, True for a torch.nn layer or an `nn.Parameter`."""
    while isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call) and value.func.attr.value in ("to", "cuda", "float", "half"):
        value = value.func.value
    qualified = index.qualify(value.func) or ""
    keywords = {a.keyword.value: spell(a.value) for a in value.args if a.keyword is not None}
    if qualified in PARAMETER:
        return keywords.get("requires_grad") != "False"
    if qualified in index.classes:
        return qualified if is_module_class(index, qualified) and not parameter_free(index, binding) else False
    if not qualified.startswith("torch.nn.") or qualified.count(".") != 2:
        return False
    layer = qualified.rsplit(".", 1)[-1]
    if not layer[:1].isupper() or layer in PARAMETER_FREE or layer.endswith("Loss"):
        return False
    return keywords.get("affine") != "False" and keywords.get("elementwise_affine") != "False"


def _frozen_in_class(index: ScriptIndex, cls: str) -> set[str]:
    """The parts the class freezes whole itself (`self.backbone.requires_grad_(False)`)."""
    node = index.classes[cls]
    return {s.owner.removeprefix("self.") for s in requires_grad_switches(index, node, {"self"})
            if s.on is False and s.owner.count(".") == 1}


def _walks_own_parts(index: ScriptIndex, methods: list[Scope]) -> bool:
    """The class reaches parts without naming them: `self.children()`, `getattr(self, name)`, `super().forward(x)`."""
    for method in methods:
        for node in descendants(method.node):
            if isinstance(node, cst.Attribute) and spell(node.value) == "self" and node.attr.value in WALKS:
                return True
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("getattr", "vars") and node.args \
                    and spell(node.args[0].value) == "self":
                return True
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "super":
                return True
    return False


def _read_outside(index: ScriptIndex, cls: str, attribute: str) -> bool:
    """Code outside the class reads an attribute of this name (`model.aux_head(...)`)."""
    return any(u.node.attr.value == attribute and u.place.scope.class_name != cls for u in index.attributes)


def _without_gradient(index: ScriptIndex, use: AttributeUse) -> tuple[str, cst.CSTNode] | None:
    """Why this use of a part gives its parameters no gradient in some training step, and where; None when it does."""
    method = use.place.scope
    where = f"`{method.name}()`"
    chain = _chain_in(index, use.place.stmt, method)
    for stmt in chain:
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                if _turns_off_gradients(index, item.item):
                    return f"runs only under `{index.module.code_for_node(item.item)}` in {where}", stmt
    parents = _expression_parents(use.place.stmt)
    node: cst.CSTNode = use.node
    while node in parents:
        parent = parents[node]
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in DETACH:
            return f"is only used detached (`.{parent.attr.value}()`) in {where}", parent
        if isinstance(parent, cst.IfExp) and node is not parent.test and not _in_both_arms(parent, use.node):
            why = _skipped_when(index, parent.test, node is parent.orelse, method)
            if why is not None:
                return f"{why} in {where}", parent
        node = parent
    for inner, outer in zip(chain, chain[1:]):
        if isinstance(outer, cst.If):
            why = _skipped_when(index, outer.test, not any(s is inner for s in outer.body.body), method)
            if why is not None:
                return f"{why} in {where}", outer
    return None


def _in_both_arms(choice: cst.IfExp, use: cst.Attribute) -> bool:
    """`self.tail if w is None else torch.cat([w, self.tail])`: the part is read whichever arm runs."""
    spelled = spell(use)
    return spelled is not None and all(
        any(isinstance(n, cst.Attribute) and spell(n) == spelled for n in descendants(arm))
        for arm in (choice.body, choice.orelse))


def _chain_in(index: ScriptIndex, stmt: cst.BaseStatement, method: Scope) -> list[cst.BaseStatement]:
    """`stmt` and the compound statements around it inside the method, innermost first."""
    chain: list[cst.BaseStatement] = []
    for around in index.enclosing_statements(stmt):
        if around is method.node:
            break
        chain.append(around)
    return chain


def _turns_off_gradients(index: ScriptIndex, item: cst.BaseExpression) -> bool:
    if not isinstance(item, cst.Call):
        return False
    qualified = index.qualify(item.func) or ""
    if qualified in NO_GRAD:
        return True
    return qualified in SET_GRAD_ENABLED and bool(item.args) and spell(item.args[0].value) == "False"


def _expression_parents(stmt: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    """Child -> parent for the nodes of a statement, down to (not into) the statements it holds."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack = [stmt]
    while stack:
        node = stack.pop()
        for child in child_nodes(node):
            if isinstance(child, (cst.BaseSuite, cst.BaseStatement)):
                continue
            parents[child] = node
            stack.append(child)
    return parents


def _skipped_when(index: ScriptIndex, test: cst.BaseExpression, in_else: bool, method: Scope) -> str | None:
    """Why a branch of `if test:` may not run in a training step, or None when it runs in every one
    (or the test is fixed for the run, as far as it can be told)."""
    code = index.module.code_for_node(test)
    training = spell(test) == "self.training"
    not_training = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and spell(test.expression) == "self.training"
    if training or not_training:
        return "runs only when the model is not training" if in_else == training else None
    if not _varies(index, test, method):
        return None
    return f"runs only when `{code}` is {'false' if in_else else 'true'}"


def _varies(index: ScriptIndex, test: cst.BaseExpression, method: Scope, depth: int = 0) -> bool:
    """The test reads an argument of the method (not its device or dtype), a name bound from one,
    a random draw, or `self.training` among other things."""
    params = set(method.params) - {"self"}
    parents = _expression_parents(test)
    for node in descendants(test):
        if isinstance(node, cst.Call) and (index.qualify(node.func) or "").startswith(RANDOM):
            return True
        if isinstance(node, cst.Attribute) and spell(node) == "self.training":
            return True
        if not isinstance(node, cst.Name) or _not_a_read(node, parents):
            continue
        parent = parents.get(node)
        if node.value in params:
            if not (isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in FIXED_FACTS):
                return True
        elif depth == 0 and any(b.value is not None and _varies(index, b.value, method, 1)
                                for b in index.bindings_of_in(node.value, method)):
            return True
    return False


def _not_a_read(name: cst.Name, parents: dict[cst.CSTNode, cst.CSTNode]) -> bool:
    """`x` in `self.x` (an attribute's name) or in `f(x=1)` (a keyword)."""
    parent = parents.get(name)
    return isinstance(parent, cst.Attribute) and parent.attr is name or isinstance(parent, cst.Arg) and parent.keyword is name


# -- the script's own switches ------------------------------------------------------------------


def _script_switches(index: ScriptIndex, site: ModelSite) -> list[Switch]:
    """Every `requires_grad` switch of the model (under any of its names) outside its classes."""
    return index.answer("model_switches", id(site), lambda: _find_script_switches(index, site))


def _whole_model_switches(index: ScriptIndex, site: ModelSite) -> set[int]:
    """ids of the switches that switch the whole model (under one of its own names, not a part's)."""
    names = aliases(index, site)
    return {id(s) for s in _script_switches(index, site)
            if (s.owner, index.scope_of[s.stmt].name) in names and _switches_itself(s)}  # not `model[0].parameters()`


def _find_script_switches(index: ScriptIndex, site: ModelSite) -> list[Switch]:
    """The switches of each scope that reaches the model, under its names there and the names of its parts."""
    by_scope: dict[str, set[str]] = {}
    for name, owner in aliases(index, site):
        by_scope.setdefault(owner, set()).add(name)
    found: list[Switch] = []
    for scope_name, names in by_scope.items():
        scope = index.functions.get(scope_name)
        node = scope.node if scope is not None else index.module if scope_name == "<module>" else None
        if node is None:
            continue
        names = _with_parts(index, scope, names)
        # only the scope's own statements: a nested function has its own names
        found += [s for s in requires_grad_switches(index, node, names) if index.scope_of[s.stmt].name == scope_name]
        found += _switched_by_helpers(index, scope, names)
    return found


def _switched_by_helpers(index: ScriptIndex, scope: Scope | None, names: set[str]) -> list[Switch]:
    """`freeze(model.backbone)`: a function of this file handed a part of the model switches its
    gradients; the switch is placed at the call (a function handed the whole model is one of the
    model's names already)."""
    calls = index.calls_from(scope) if scope is not None else [c for c in index.calls if c.place.scope.is_module]
    found: list[Switch] = []
    for call in calls:
        function = index.functions.get(call.name or "")
        if function is None or not isinstance(function.node, cst.FunctionDef) or function.class_name:
            continue
        positional = [a for a in call.node.args if a.keyword is None and not a.star]
        for arg in call.node.args:
            spelled = base_spelling(arg.value)
            if spelled is None or spelled in names or not _part_of(spelled, names):
                continue
            param = arg.keyword.value if arg.keyword is not None else (
                function.params[positional.index(arg)] if arg in positional and positional.index(arg) < len(function.params) else None)
            if param is None:
                continue
            found += [Switch(s.node, spelled + s.owner.removeprefix(param), s.on, call.place.stmt)
                      for s in requires_grad_switches(index, function.node, {param})]
    return found


def _with_parts(index: ScriptIndex, scope: Scope | None, names: set[str]) -> set[str]:
    """`names` and the names a scope (None: the module) binds to parts of them: `trunk = model[0]`,
    `encoder = model.encoder`."""
    bindings = index.bindings_in(scope) if scope is not None else [b for b in index.bindings if b.place.scope.is_module]
    return names | {b.target for b in bindings
                    if isinstance(b.value, (cst.Attribute, cst.Subscript)) and _part_of(base_spelling(b.value), names)}


def _names_in_site_scope(index: ScriptIndex, site: ModelSite) -> set[str]:
    """The model's names where it is wrapped, with the names of its parts there."""
    names = {name for name, scope in aliases(index, site) if scope == site.scope.name}
    return _with_parts(index, None if site.scope.is_module else site.scope, names)


def _trains(index: ScriptIndex, stmt: cst.BaseStatement, backward: list[cst.Call], short: set[str]) -> bool:
    """The statement runs a backward, or calls a function that trains (`short`: their last names)."""
    backward_ids = {id(call) for call in backward}
    return any(id(call) in backward_ids or (spell(call.func) or "").rsplit(".", 1)[-1] in short
               for call in index.calls_under(stmt))


def _part_of(spelled: str | None, names: set[str]) -> bool:
    return spelled is not None and any(spelled == n or spelled.startswith(n + ".") for n in names)


def _switches_itself(switch: Switch) -> bool:
    """The switch names its owner itself (`model.parameters()`, `model.requires_grad_(False)`), not
    a part reached by an index (`model[0].parameters()`, `model.layers[-1].weight.requires_grad`),
    which `Switch.owner` spells as the indexed name."""
    node = switch.node
    if isinstance(node, cst.For):
        return any(isinstance(c.func, cst.Attribute) and c.func.attr.value in ("parameters", "named_parameters")
                   and spell(c.func.value) == switch.owner for c in calls_in(node.iter))
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return spell(node.func.value) == switch.owner
    if isinstance(node, cst.Assign):
        return any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                   and spell(t.target.value) == switch.owner for t in node.targets)
    return False


def _freezes_all(value: cst.Call) -> bool:
    """`Net().requires_grad_(False)` (maybe `.to(device)` around it)."""
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "requires_grad_" and c.args
               and spell(c.args[0].value) == "False" for c in calls_in(value))


def _hands_over(index: ScriptIndex, stmt: cst.BaseStatement, spelling: str) -> bool:
    """`stmt` passes the model to a function of this file (`replace_head(model, 2)`), which may add a trainable part."""
    return any(spell(c.func) in index.functions and any(spell(a.value) == spelling for a in c.args)
               for c in index.calls_under(stmt))
