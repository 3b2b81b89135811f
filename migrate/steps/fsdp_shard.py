"""FSDP2 shards each trained model where DDP would wrap it (placed, weights loaded, before
torch.compile and training), or earlier: right above the statement that builds an optimizer over
it, when that comes first. An optimizer built before `fully_shard` holds the unsharded
parameters, and the model silently never learns; moving the shard up is one insertion, where
moving the optimizer (and the schedulers and loads that read it) would be several. A load of
weights that then follows the shard becomes `set_model_state_dict` (migrate.steps.fsdp_state_dicts).
A `self.model` bound from a local (`self.model, self.optimizer = model, optimizer`) is followed back
to it: an optimizer built over the local is sharded above, under the local's name; a local bound
again between that optimizer and `self.model = model` is refused (MIG303, file unchanged). A model
and its optimizer both handed in (`Trainer(model=model, optimizer=optimizer)`, read as parameters
or from `**kwargs`) are followed to the caller, and the shard goes above the optimizer there; where
that caller cannot be found (two of them, `Trainer(**parts)`), the file is refused (MIG303).

Each repeated block (migrate.analysis.blocks) is sharded on its own, then the model, so that a
forward gathers one block's weights at a time. FSDP2 keeps the user's class (`fully_shard`
changes the module in place), so nothing is routed through `.module`; methods other than
forward() that the script calls on the model after the shard are registered with
`register_fsdp_forward_method` when they run its layers (`generate`), or they would read the shards
instead of the weights. Never a method that builds the optimizer (`configure_optimizers`, one that
calls `torch.optim.*` or returns the model's parameters): registered, it would hold the weights
gathered for the call, which never change again (measured: embeddings 0.0 change after 30 steps);
unregistered it holds the shards, as it must. A method that rewrites the weights (`init_weights`,
`reset_parameters`, one that assigns `.data`, calls `.copy_` or `nn.init.*`) called after the shard
is refused (MIG309): registered, its rewrite lands on gathered weights that are then discarded, and
unregistered it meets DTensor shards that plain tensors cannot be copied into; moving the shard below
it would put it after the optimizer, which must hold the shards. A method of a class this run cannot
read is reported (MIG302) instead: registering an attribute that is a submodule would fail.
A submodule cast to another dtype than the rest of the model before the shard (`model.body.half()`,
or `model.half()` then `model.norm.float()`) is sharded as its own unit first: FSDP2 needs one dtype
per unit ("FSDP expects uniform original parameter dtype" at the first forward).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.blocks import Blocks, model_blocks
from migrate.analysis.models import aliases, is_after, top_statement
from migrate.analysis.gradients import last_change
from migrate.analysis.placement import model_moves, placed_by_script
from migrate.analysis.sites import ModelSite
from migrate.analysis.state_dicts import moved_names
from migrate.analysis.index import AttributeUse, Scope, ScriptIndex, free_name, spell
from migrate.analysis.syntax import argument, calls_in
from migrate.analysis.trained import calls_of, optimizer_owners
from migrate.analysis.upstream import kwargs_key, unmoved, upstream
from migrate.steps.base import WRAPPER_SAFE, Context, statements
from migrate.steps.wrap_model import remove_data_parallel, report_unwrapped_model, without_module
from migrate.target_options import FsdpOptions

FSDP = "torch.distributed.fsdp"
# what an nn.Module answers itself after fully_shard, besides forward: no registration needed
MODULE_METHODS = WRAPPER_SAFE | frozenset({
    "state_dict", "load_state_dict", "named_modules", "get_submodule", "add_module", "register_buffer",
    "register_parameter", "extra_repr", "reshard", "unshard", "set_requires_gradient_sync",
    "set_reshard_after_backward", "set_is_last_backward", "share_memory", "float", "to_empty",
})


def fsdp_shard(ctx: Context) -> None:
    if not ctx.sites.models:
        report_unwrapped_model(ctx)
        ctx.refused = True
        return
    for site in ctx.sites.models:
        remove_data_parallel(ctx, site)
        shard(ctx, site)
        if site.data_parallel:
            without_module(ctx, site)


def shard(ctx: Context, site: ModelSite) -> None:
    """The fully_shard calls for one model: where DDP would wrap it, or above its optimizer."""
    _below_its_moves(ctx, site)
    _below_its_casts(ctx, site, model_blocks(ctx.index, site, ctx.path, FsdpOptions.of(ctx.options).shard, ctx.read_module))
    moved, model = _above_its_optimizer(ctx, site)
    if moved is None and not ctx.refused:
        _refuse_handed_optimizer(ctx, site)
    if ctx.refused:
        return
    if moved is not None and _binds_on_the_same_line(ctx, moved, {site.spelling, model}):
        ctx.report("MIG308", f"`{ctx.code(moved).strip()}` builds `{model}` and an optimizer over it on one "
                   "line: FSDP2 must shard the model between the two, so put the optimizer on a line of its own; the "
                   "file is left unchanged", moved)
        ctx.refused = True
        return
    blocks = model_blocks(ctx.index, site, ctx.path, FsdpOptions.of(ctx.options).shard, ctx.read_module)
    methods, parts = _called_outside_forward(ctx, site, blocks)
    if ctx.refused:
        return
    parts = _cast_parts(ctx, site, blocks) + [part for part in parts if part not in _cast_parts(ctx, site, blocks)]
    new = statements(_shard_code(ctx, site, model, blocks, moved, parts) + _registrations(ctx, model, methods))
    if site.wrap_before is not None:
        ctx.plan.insert_before(site.wrap_before, new)
    else:
        assert site.wrap_after is not None
        ctx.plan.insert_after(site.wrap_after, new)
    _report_sharding(ctx, site, blocks)


def _above_its_optimizer(ctx: Context, site: ModelSite) -> tuple[cst.BaseStatement | None, str]:
    """When an optimizer over the model is built before the place DDP would wrap it, the shard
    goes right above the statement that builds it, and the site moves there (so every later step
    sees the model as sharded from that statement on). That statement is in the model's own
    scope before the wrap, or in a scope the model comes from (migrate.analysis.upstream) before
    it hands the model on (`optimizer = SGD(model.parameters()); return model, optimizer`). A
    `self.model` site bound from a local before the wrap (`self.model = model`, or `self.model,
    self.optimizer = model, optimizer`) is followed back to that local: an optimizer over it is
    over the model too, and the shard above it names the local (`self.model` is not bound yet).
    Returns the statement (None when the shard stays where DDP wraps) and the name the shard
    calls the model by."""
    index = ctx.index
    own = {name for name, scope in aliases(index, site) if scope == site.scope.name}
    anchor = site.wrap_before or site.wrap_after
    assert anchor is not None
    sources = _attribute_sources(ctx, site, anchor)
    if ctx.refused:
        return None, site.spelling
    own |= set(sources)
    places: list[tuple[set[str], Scope, cst.Module | cst.IndentedBlock, cst.BaseStatement | None]] = [
        (own, site.scope, index.block_of[anchor][0], None)]
    for link in upstream(index, site):
        if link.built is not None:
            continue  # built right in the call that hands it on: no optimizer over it before
        body = link.scope.node.body if isinstance(link.scope.node, cst.FunctionDef) else link.scope.node
        if isinstance(body, (cst.IndentedBlock, cst.Module)):
            places.append(({link.spelling}, link.scope, body, link.hand_off))
    built = _optimizers_built(ctx)
    for names, scope, block, hand_off in places:
        first: cst.BaseStatement | None = None
        for stmt, where, held in built:
            if where is not scope or not (held & names):
                continue
            if hand_off is None and is_after(index, stmt, site):
                continue  # built after the wrap: it holds the sharded parameters
            top = top_statement(index, stmt, block)
            if top is None or (hand_off is not None and not _before(index, top, hand_off, block)
                               and top is not top_statement(index, hand_off, block)):
                continue  # (an optimizer built in the call that hands the model on is built first)
            if first is None or index.block_of[top][1] < index.block_of[first][1]:
                first = top
        if first is not None:
            if scope is not site.scope:
                site.spelling = next(iter(names))
            site.scope = scope
            site.wrap_before, site.wrap_after = first, None
            return first, _named_at(index, first, site.spelling, sources)
    return None, site.spelling


def _refuse_handed_optimizer(ctx: Context, site: ModelSite) -> None:
    """MIG303 (file unchanged) when the model and the optimizer stepped beside it are both handed
    in to the scope that would shard it (`Trainer(model=model, optimizer=optimizer)` called from two
    places, or through `**parts`), and the caller's statement that builds that optimizer cannot be
    found: a shard where DDP would wrap comes after that optimizer was built over the unsharded
    parameters, which `fully_shard` replaces, and the model silently never learns."""
    index = ctx.index
    scope = site.scope
    if not _handed_in(index, site.spelling, scope):
        return
    if any(where is scope or (scope.class_name is not None and where.class_name == scope.class_name)
           for _stmt, where, held in _optimizers_built(ctx) if site.spelling in held):
        return  # the model's optimizer is built here, over the model as it is at the wrap
    for call in index.calls:
        func = call.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "step":
            continue
        stepped = spell(call.node.args[0].value) if call.node.args else spell(func.value)
        if stepped is None or "sched" in stepped.lower() or not _stepped_here(call.place.scope, scope, stepped):
            continue
        if _handed_in(index, stepped, scope):
            shown = scope.name.replace(".__init__", "")
            ctx.report("MIG303", f"`{stepped}` and `{site.spelling}` are both handed in to `{shown}`, and this conversion "
                       f"cannot follow them back to the statement that builds the optimizer over the model (it follows "
                       "one caller that passes each by name): FSDP2 must shard the model before its optimizer is built, and sharding it "
                       f"here would leave `{stepped}` holding the replaced, unsharded parameters (the model never learns); "
                       "call `fully_shard(model)` in the caller right before it builds the optimizer; the file is left "
                       "unchanged", site.wrap_before or site.wrap_after)
            ctx.refused = True
            return


def _stepped_here(stepped_in: Scope, scope: Scope, spelling: str) -> bool:
    """Whether a `.step()` in `stepped_in` steps what `spelling` names in `scope`: a `self.x` of the
    same class, or a name of the same function."""
    if spelling.startswith("self."):
        return scope.class_name is not None and stepped_in.class_name == scope.class_name
    return stepped_in is scope


def _handed_in(index: ScriptIndex, spelling: str, scope: Scope) -> bool:
    """`spelling` comes from outside `scope`: a parameter of it, or a `self.x` that `scope` binds
    from a parameter or a `**kwargs` key (`self.model = kwargs["model"].to(device)`)."""
    if not spelling.startswith("self."):
        return spelling in scope.params
    for binding in index.bindings:
        if binding.target != spelling or binding.place.scope is not scope:
            continue
        value = unmoved(binding.value)
        if value is not None and (kwargs_key(scope, value) is not None or spell(value) in scope.params):
            return True
    return False


def _attribute_sources(ctx: Context, site: ModelSite, anchor: cst.BaseStatement) -> dict[str, cst.BaseStatement]:
    """For a `self.model` site: each local it is bound from before the wrap, in its own block
    (`self.model = model`, `self.model, self.optimizer = model, optimizer`, `self.model =
    model.cuda()`), with the statement of that binding. A local bound again between an optimizer
    over it and that binding cannot be told from the model: refused (MIG303, file unchanged)."""
    index = ctx.index
    if not site.spelling.startswith("self."):
        return {}
    block, position = index.block_of[anchor]
    found: dict[str, cst.BaseStatement] = {}
    for binding in index.bindings:
        local = _moved_local(binding.value)
        top = top_statement(index, binding.place.stmt, block)
        if (binding.target != site.spelling or local is None or binding.place.scope is not site.scope
                or top is None or index.block_of[top][1] > position):
            continue
        found.setdefault(local, top)
    for local, bound in found.items():
        _refuse_rebound(ctx, site, local, bound, block)
    return found


def _moved_local(value: cst.BaseExpression | None) -> str | None:
    """`model`, or `model.cuda()` / `model.to(device)` (a module moved in place is itself): the local's name."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("to", "cuda"):
        value = value.func.value
    return value.value if isinstance(value, cst.Name) else None


def _refuse_rebound(ctx: Context, site: ModelSite, local: str, bound: cst.BaseStatement,
                    block: cst.Module | cst.IndentedBlock) -> None:
    """MIG303 when an optimizer over `local` is built and `local` is then bound again before
    `self.model = local`: the shard cannot go above that optimizer and still be the model's."""
    index = ctx.index
    end = index.block_of[bound][1]
    tops = [top_statement(index, b.place.stmt, block) for b in index.bindings if b.target == local
            and b.place.scope is site.scope and _moved_local(b.value) != local]  # `model = model.cuda()`: the same module
    rebinds = [at for top in tops if top is not None and (at := index.block_of[top][1]) < end]
    for stmt, where, held in _optimizers_built(ctx):
        top = top_statement(index, stmt, block) if where is site.scope and local in held else None
        if top is None or index.block_of[top][1] >= end:
            continue
        start = index.block_of[top][1]
        if any(at > start for at in rebinds):
            ctx.report("MIG303", f"`{ctx.code(top).strip()}` builds an optimizer over `{local}`, which is bound again "
                       f"before `{site.spelling}` is bound from it (line {ctx.position(bound)[0]}): FSDP2 must shard the "
                       "model before its optimizer is built, and this conversion cannot tell which module that is; "
                       "build the optimizer after the model's last binding; the file is left unchanged", top)
            ctx.refused = True
            return


def _named_at(index: ScriptIndex, stmt: cst.BaseStatement, spelling: str, sources: dict[str, cst.BaseStatement]) -> str:
    """The model's name at `stmt`: the local that `self.model` is bound from later, or its own spelling."""
    for local, bound in sources.items():
        if index.block_of[stmt][1] <= index.block_of[bound][1]:
            return local
    return spelling


def _optimizers_built(ctx: Context) -> list[tuple[cst.BaseStatement, Scope, set[str]]]:
    """(statement, scope, the modules it holds by name) for each optimizer construction, and for
    each call of a function of this file that builds one over a module it is handed
    (`optimizer = make_optimizer(model)`: the call's statement, holding `model`)."""
    index = ctx.index
    found: list[tuple[cst.BaseStatement, Scope, set[str]]] = []
    built = [call for call in ctx.sites.optimizers]
    built += [site for stepped in ctx.sites.stepped if isinstance(stepped.built, cst.Call)  # `model.configure_optimizers(...)`
              and (site := index.call_site(stepped.built)) is not None and site not in built]
    for call in built:
        scope = call.place.scope
        held = _holds(ctx, call.node, scope)
        found.append((call.place.stmt, scope, held))
        for param in held & set(scope.params):
            position = scope.params.index(param) - (1 if scope.class_name else 0)
            for caller in calls_of(index, scope):
                passed = argument(caller.node, param, position)
                name = spell(passed.value) if passed is not None else None
                if name is not None:
                    found.append((caller.place.stmt, caller.place.scope, {name}))
    return found


def _binds_on_the_same_line(ctx: Context, stmt: cst.BaseStatement, names: set[str]) -> bool:
    """`model = Net(); optimizer = SGD(model.parameters())`: the model is bound on the optimizer's line."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) < 2:
        return False
    return any(b.place.stmt is stmt and b.target in names for b in ctx.index.bindings)


def _holds(ctx: Context, call: cst.Call, scope: Scope) -> set[str]:
    """The names of the modules whose parameters an optimizer construction holds, with every module
    above each (`model.backbone`'s parameters are `model`'s too); every name it reads when that
    cannot be told."""
    owners = optimizer_owners(ctx.index, call, scope)
    if owners is None:
        return {name.value for name in _names_in(call)}
    spelled = [owner.spelling for owner in owners if owner.scope is scope]
    return {spelling.rsplit(".", cut)[0] for spelling in spelled for cut in range(spelling.count(".") + 1)}


def _before(index: ScriptIndex, stmt: cst.BaseStatement, hand_off: cst.BaseStatement, block: cst.Module | cst.IndentedBlock) -> bool:
    """Whether `stmt` (directly in `block`) runs before the statement of `block` holding `hand_off`."""
    top = top_statement(index, hand_off, block)
    return top is not None and index.block_of[stmt][1] < index.block_of[top][1]


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

    node.visit(Collect())
    return found


def _shard_code(ctx: Context, site: ModelSite, model: str, blocks: Blocks, moved: cst.BaseStatement | None,
                parts: list[str]) -> str:
    """The fully_shard calls, calling the model `model` (the site's spelling, or the local it comes from)."""
    fully_shard = ctx.imported(FSDP, "fully_shard")
    settings = _settings(ctx, site)
    lines: list[str] = []
    if moved is not None:
        lines.append("# FSDP2: sharded before the optimizer is built, so that it holds the sharded parameters")
    if not _placed(ctx, site):
        mesh = ctx.imported("torch.distributed.device_mesh", "init_device_mesh")
        lines.append("# sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)")
        lines.append(f"device_mesh = {mesh}(next({model}.parameters()).device.type, ({ctx.world_size()},))")
    one_call = not blocks.classes and not parts
    if settings and (one_call or [key for key, _ in settings] == ["mesh"]):  # short enough to repeat
        extra = ", " + ", ".join(f"{key}={value}" for key, value in settings)
    elif settings:
        lines.append("fsdp_settings = {" + ", ".join(f'"{key}": {value}' for key, value in settings) + "}")
        extra = ", **fsdp_settings"
    else:
        extra = ""
    if blocks.classes:
        loop = _free_name(ctx, site, "submodule")
        lines += [
            f"for {loop} in {model}.modules():  # each block's weights are gathered only while it runs",
            f"    if {_is_block(ctx, blocks, loop)}:",
            f"        {fully_shard}({loop}{extra})",
        ]
    casts = _cast_parts(ctx, site, blocks)
    for part in parts:  # its own unit: its hooks gather its weights when the script calls it directly
        why = "cast to its own dtype: FSDP2 needs one dtype per unit" if part in casts else \
            f"called directly, not only through {model}'s forward"
        lines.append(f"{fully_shard}({model}.{part}{extra})  # {why}")
    lines.append(f"{fully_shard}({model}{extra})")
    return "\n".join(lines) + "\n"


def _settings(ctx: Context, site: ModelSite) -> list[tuple[str, str]]:
    """fully_shard's keyword arguments: the mesh of a model kept on the CPU, and the policies
    --mixed-precision and --cpu-offload ask for."""
    options = FsdpOptions.of(ctx.options)
    entries: list[tuple[str, str]] = []
    if not _placed(ctx, site):
        entries.append(("mesh", "device_mesh"))  # made by _shard_code
    if options.mixed_precision != "none":
        policy = ctx.imported(FSDP, "MixedPrecisionPolicy")
        dtype = {"bf16": "bfloat16", "fp16": "float16"}[options.mixed_precision]
        entries.append(("mp_policy", f"{policy}(param_dtype={ctx.torch}.{dtype}, reduce_dtype={ctx.torch}.float32)"))
    if options.cpu_offload:
        policy = ctx.imported(FSDP, "CPUOffloadPolicy")
        # pinned memory needs a GPU: without one the policy fails to build
        entries.append(("offload_policy", f"{policy}(pin_memory={ctx.torch}.cuda.is_available())"))
    return entries


def _placed(ctx: Context, site: ModelSite) -> bool:
    """Whether FSDP2's default mesh (the GPU's, whenever there is one) is where the script wants the
    model: it moves the model after the shard (`self.model = model.to(gpu_id)` in a Trainer: the
    shard puts it there first), or before it, unconditionally (`model = Net().to(device)`). Else
    (never moved, or only under an `if`) the shard takes the device the model is on."""
    return placed_by_script(ctx.index, site)


def _is_block(ctx: Context, blocks: Blocks, loop: str) -> str:
    """`isinstance(submodule, (Block,))`, with a test by class name for --shard classes this run cannot see."""
    seen = [each for each in blocks.classes if not each.by_name]
    by_name = [each.name for each in blocks.classes if each.by_name]
    tests: list[str] = []
    if seen:
        spelled = [_class_spelling(ctx, each.name, each.module) for each in seen]
        tests.append(f"isinstance({loop}, {spelled[0]})" if len(spelled) == 1
                     else f"isinstance({loop}, ({', '.join(spelled)}))")
    if by_name:
        quoted = ", ".join(f'"{name}"' for name in by_name)
        tests.append(f"type({loop}).__name__ in ({quoted},)")
    return " or ".join(tests)


def _class_spelling(ctx: Context, name: str, module: str | None) -> str:
    if module is None:
        return name
    if module == "torch.nn":
        return f"{ctx.torch}.nn.{name}"
    return ctx.imported(module, name)


def _free_name(ctx: Context, site: ModelSite, name: str) -> str:
    """`name`, or `name_`...: one the scope the loop goes in does not use already."""
    used = {b.target for b in ctx.index.bindings if b.place.scope is site.scope} | set(ctx.index.imports)
    return free_name(name, used | set(site.scope.params))


def _report_sharding(ctx: Context, site: ModelSite, blocks: Blocks) -> None:
    """MIG301: how the model is sharded, and why only as a whole when that is all."""
    where = site.wrap_before or site.wrap_after
    if blocks.classes:
        names = ", ".join(f"`{each.name}`" for each in blocks.classes)
        how = "named by --shard" if FsdpOptions.of(ctx.options).shard else "the repeated blocks found"
        unseen = [f"`{each.name}`" for each in blocks.classes if each.by_name]
        if unseen:
            how += f"; {', '.join(unseen)} matched by class name: this run cannot see where it is defined"
        ctx.report("MIG301", f"`{site.spelling}` is sharded per {names} ({how}), then as a whole: a forward gathers one "
                   "block's weights at a time", where)
    elif blocks.torch_layer:
        ctx.report("MIG301", f"`{site.spelling}` is sharded as one unit: it is one torch layer "
                   f"(`{blocks.model_class}`), with nothing finer to shard", where)
    elif blocks.unreadable is not None:
        ctx.report("MIG301", f"`{site.spelling}` is sharded as one unit: {blocks.unreadable}, so its repeated blocks "
                   "cannot be found; every forward gathers all its weights at once (peak memory of the whole model); "
                   "name the block class with --shard CLASS", where)
    else:
        unread = ""
        if blocks.unread:
            listed = ", ".join(f"`{name}`" for name in blocks.unread[:3])
            unread = (f" this run can read ({listed}, which it builds, {'is' if len(blocks.unread) == 1 else 'are'} "
                      "not defined in this file or in a module of its folder)")
        ctx.report("MIG301", f"`{site.spelling}` is sharded as one unit: "
                   f"{f'`{blocks.model_class}`' if blocks.model_class else 'it'} holds no list of repeated blocks"
                   f"{unread}, so every forward gathers all its weights at once; name a block class with --shard CLASS "
                   "to shard it finer", where)


def _called_outside_forward(ctx: Context, site: ModelSite, blocks: Blocks) -> tuple[list[str], list[str]]:
    """What the script calls on the model after the shard besides forward(): methods of its class
    (registered with `register_fsdp_forward_method`, which gathers the weights around them) and
    submodules called directly (`model.encoder(x)`: sharded on their own, so their own hooks gather
    their weights). Anything else, on a class this run cannot read, is reported (MIG302)."""
    index = ctx.index
    names = aliases(index, site).union(*(aliases(index, other) for other in moved_names(index, site)))
    methods: list[str] = []
    parts: list[str] = []
    seen: set[str] = set()
    for use in index.attributes:
        attribute = use.node.attr.value
        if (not use.called or attribute in MODULE_METHODS or attribute.startswith("_") or attribute in seen
                or (use.owner, use.place.scope.name) not in names or not is_after(index, use.place.stmt, site)):
            continue
        seen.add(attribute)
        kind = _method_kind(ctx, blocks, attribute)
        if kind == "optimizer":
            continue  # it must hold the shards: run on the sharded parameters as they are
        if kind == "weights":
            _refuse_weight_rewrite(ctx, site, use)
            return [], []
        if attribute in blocks.methods:
            methods.append(attribute)
        elif attribute in blocks.parts:
            parts.append(attribute)
        else:
            ctx.report("MIG302", f"`{ctx.code(use.node)}(...)` is called on the sharded model, and its class cannot be "
                       "read here: if it runs the model's layers outside forward(), add "
                       f'`register_fsdp_forward_method({site.spelling}, "{attribute}")` (a method) or '
                       f"`fully_shard({site.spelling}.{attribute})` (a submodule) before `fully_shard({site.spelling})`, "
                       "or its weights are read as shards", use.node)
    return methods, parts


def _registrations(ctx: Context, model: str, methods: list[str]) -> str:
    if not methods:
        return ""
    register = ctx.imported(FSDP, "register_fsdp_forward_method")
    return "".join(f'{register}({model}, "{method}")  # gathers the weights around it, as around forward()\n'
                   for method in methods)


OPTIMIZER_BUILDERS = frozenset({"configure_optimizers", "configure_optimizer", "build_optimizer", "make_optimizer"})
WEIGHT_REWRITERS = frozenset({"init_weights", "reset_parameters", "initialize_weights", "init_parameters"})
CASTS = frozenset({"half", "float", "double", "bfloat16"})


def _method_kind(ctx: Context, blocks: Blocks, name: str) -> str | None:
    """"optimizer" for a method that builds the optimizer, "weights" for one that rewrites the
    weights, else None (it runs layers, or does not touch the weights): by its body when its class
    is in this file, else by its name."""
    found = _method_def(ctx, blocks.model_class, name, 0)
    if found is None:
        return "optimizer" if name in OPTIMIZER_BUILDERS else "weights" if name in WEIGHT_REWRITERS else None
    if name in OPTIMIZER_BUILDERS or _builds_optimizer(ctx, found):
        return "optimizer"
    if name in WEIGHT_REWRITERS or _rewrites_weights(ctx, blocks, found, 0):
        return "weights"
    return None


def _method_def(ctx: Context, class_name: str | None, name: str, depth: int) -> cst.FunctionDef | None:
    """The `def name` of a class of this file, or of its bases in this file."""
    cls = ctx.index.classes.get(class_name or "")
    if cls is None or depth > 5:
        return None
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            return stmt
    for base in cls.bases:
        found = _method_def(ctx, spell(base.value), name, depth + 1)
        if found is not None:
            return found
    return None


def _builds_optimizer(ctx: Context, method: cst.FunctionDef) -> bool:
    """It calls `torch.optim.*`, or returns the model's parameters (`return [{"params": ...}]`)."""
    for node in _descendants(method):
        if isinstance(node, cst.Call) and (ctx.index.qualify(node.func) or "").startswith("torch.optim."):
            return True
        if isinstance(node, cst.Return) and node.value is not None and any(
                isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)
                and inner.func.attr.value in ("parameters", "named_parameters") for inner in _descendants(node.value)):
            return True
    return False


def _rewrites_weights(ctx: Context, blocks: Blocks, method: cst.FunctionDef, depth: int) -> bool:
    """It assigns `.data`, calls `.copy_` or `nn.init.*`, or a method of the class that does."""
    for node in _descendants(method):
        if isinstance(node, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(isinstance(t, cst.Attribute) and t.attr.value == "data" for t in targets):
                return True
        if not isinstance(node, cst.Call):
            continue
        qualified = ctx.index.qualify(node.func) or ""
        if qualified.startswith("torch.nn.init.") or (isinstance(node.func, cst.Attribute) and node.func.attr.value == "copy_"):
            return True
        called = qualified.removeprefix("self.") if qualified.startswith("self.") and qualified.count(".") == 1 else None
        if called in ("apply",) and node.args:  # `self.apply(self._init_weights)`
            called = (spell(node.args[0].value) or "").removeprefix("self.")
        inner = _method_def(ctx, blocks.model_class, called, 0) if called and depth < 3 else None
        if inner is not None and inner is not method and (called in WEIGHT_REWRITERS or _rewrites_weights(ctx, blocks, inner, depth + 1)):
            return True
    return False


def _descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, visited: cst.CSTNode) -> bool:
            found.append(visited)
            return True

    node.visit(Collect())
    return found


def _refuse_weight_rewrite(ctx: Context, site: ModelSite, use: AttributeUse) -> None:
    """MIG309: a method that rewrites the weights, called after the shard."""
    ctx.report("MIG309", f"`{ctx.code(use.node)}(...)` rewrites `{site.spelling}`'s weights after it is sharded: "
               "registered with register_fsdp_forward_method, the rewrite would land on gathered weights that are "
               "discarded after the call, and unregistered it meets DTensor shards; call it before the optimizer is "
               "built (the shard goes there), or rewrite the weights before the shard; the file is left unchanged",
               use.node)
    ctx.refused = True


def _cast_parts(ctx: Context, site: ModelSite, blocks: Blocks) -> list[str]:
    """The submodules the script casts to a dtype of their own before the shard (`model.body.half()`,
    `model.norm.float()`), which are not already their own unit as blocks: each is sharded first."""
    index = ctx.index
    names = aliases(index, site)
    found: list[str] = []
    for call in index.calls:
        func = call.node.func
        if not isinstance(func, cst.Attribute) or not _is_cast(ctx, call.node):
            continue
        owner = spell(func.value) or ""
        root, _, part = owner.partition(".")
        if (not part or part in found or (root, call.place.scope.name) not in names
                or is_after(index, call.place.stmt, site) or _is_block_part(ctx, blocks, part)):
            continue
        found.append(part)
    return found


def _below_its_moves(ctx: Context, site: ModelSite) -> None:
    """A move of the model before training, under a condition of the script's (`if opt.cuda:
    netD.cuda()` after `print(netD)`): the shard goes below it, as DDP's wrap does, so that the
    mesh is the device the script chose (fully_shard would put the model on the GPU itself)."""
    backward = [call.node for call in ctx.sites.backward_calls]
    changed = last_change(ctx.index, site, backward, ctx.sites.training_scopes)
    if changed is None or not _moves_the_model(ctx, site, changed):
        return
    anchor = site.wrap_before or site.wrap_after
    assert anchor is not None
    block, start = ctx.index.block_of[anchor]
    between = block.body[start:ctx.index.block_of[changed][1] + 1]
    if any(ctx.index.qualify(call.func) == "torch.compile" for stmt in between for call in calls_in(stmt)):
        return  # FSDP2 shards before torch.compile: the shard stays above it
    site.wrap_before, site.wrap_after = None, changed


def _moves_the_model(ctx: Context, site: ModelSite, stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` is one of the model's moves (analysis.placement)."""
    return any(move.stmt is stmt or stmt in ctx.index.enclosing_statements(move.stmt) for move in model_moves(ctx.index, site))


def _below_its_casts(ctx: Context, site: ModelSite, blocks: Blocks) -> None:
    """A submodule cast after the model is built (`model = Net()` then `model.body.half()`), or a
    method that rewrites its weights (`model.init_weights()`): the shard goes below the last such
    call of its block (still above an optimizer built there: `_above_its_optimizer`), so that each
    unit holds the dtype it trains in and the rewrite lands on the weights that are sharded."""
    index = ctx.index
    anchor = site.wrap_before or site.wrap_after
    assert anchor is not None
    block, position = index.block_of[anchor]
    names = {name for name, scope in aliases(index, site) if scope == site.scope.name}
    last: cst.BaseStatement | None = None
    for call in index.calls:
        func = call.node.func
        if not isinstance(func, cst.Attribute):
            continue
        root, _, part = (spell(func.value) or "").partition(".")
        rewrite = not part and root in names and _method_kind(ctx, blocks, func.attr.value) == "weights"
        if not rewrite and not (part and _is_cast(ctx, call.node)):
            continue
        top = top_statement(index, call.place.stmt, block) if root in names else None
        if top is None or call.place.scope is not site.scope:
            continue
        at = index.block_of[top][1]
        if (at >= position if site.wrap_before is not None else at > position) and (
                last is None or at > index.block_of[last][1]):
            last = top
    if last is not None:
        site.wrap_before, site.wrap_after = None, last


def _is_cast(ctx: Context, call: cst.Call) -> bool:
    """`.half()`, `.float()`, `.bfloat16()`, `.double()`, `.to(torch.float16)`, `.to(dtype=...)`."""
    assert isinstance(call.func, cst.Attribute)
    attribute = call.func.attr.value
    if attribute in CASTS and not call.args:
        return True
    if attribute != "to":
        return False
    return any((arg.keyword is not None and arg.keyword.value == "dtype")
               or (ctx.index.qualify(arg.value) or "").startswith(("torch.float", "torch.half", "torch.bfloat", "torch.double"))
               for arg in call.args)


def _is_block_part(ctx: Context, blocks: Blocks, part: str) -> bool:
    """Whether `self.<part>` is built as an instance of a block class (then the block loop shards it)."""
    cls = ctx.index.classes.get(blocks.model_class or "")
    head = part.split(".")[0]
    if cls is None or not blocks.classes:
        return False
    block_names = {each.name for each in blocks.classes}
    for node in _descendants(cls):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            if any(spell(t.target) == f"self.{head}" for t in node.targets):
                built = (spell(node.value.func) or "").rsplit(".", 1)[-1]
                return built in block_names and "." not in part
    return False
