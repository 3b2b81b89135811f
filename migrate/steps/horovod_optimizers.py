"""Horovod's optimizer recipe: each stepped optimizer is wrapped once in `hvd.DistributedOptimizer`
where it is built (or once its model is moved and cast), so its gradients are averaged across ranks
during backward.

- Built in a function of this file and returned in a tuple its only caller unpacks (`g_opt, d_opt =
  make_optimizers(g, d, cfg)`): each is wrapped right after that line, under the caller's name, its
  parameters named by the models the caller passes (analysis.trained.handed_out).
- Names: Horovod names every all-reduce after its parameter; two optimizers over two models (a
  GAN's generator and discriminator) both have `net.0.weight`, which Horovod refuses mid-backward
  ("a tensor with the same name as another tensor"), so with several optimizers each model's names
  get its spelling as a prefix.
- Placement: after the last statement of its block, before training, that moves or casts a model
  it holds (`opt = Adam(m.parameters())`, then `if args.cuda: m.cuda()`), as DDP's wrap goes
  (analysis.gradients.last_change), unless something in between uses the optimizer: Horovod hooks
  each parameter when it wraps, and a parameter moved or cast afterwards loses its hook (every
  all-reduce then waits for `step()`, without overlap). Each model's broadcast goes there too.
- Rebuilt during training (`def lower_lr(self): self.optimizer = SGD(...)` called between epochs,
  `optimizer = rebuild(model, lr)` in the epoch loop): steps.horovod_rebuilt finds the rebinding and
  retires the optimizer it replaces; a torch optimizer built there is wrapped here as the first one
  (its own named parameters, the same backward_passes_per_step), its state not broadcast (a fresh
  optimizer holds none; the parameters are already equal). Another shape: MIG402. A construction
  inside the training loop's own function stays refused (MIG402), and so does an optimizer bound
  again by a call this file does not follow (`G, opt = load_resume(G, opt, path)`): MIG402 names
  that line (a lone `opt = restore(G, path)`, not handed the optimizer, after its wrap: retired and
  its new optimizer wrapped, by steps.horovod_rebuilt), and says that leaving the name unbound there converts when the helper hands back the
  optimizer it is given.
- Accumulation: a recognised `if (step + 1) % n == 0: optimizer.step()` gives
  `backward_passes_per_step=n`; Horovod stops with an error on more passes than it was told.
- Between backward and the step, a script that reads the gradients (clipping, a GradScaler's
  unscale) gets `optimizer.synchronize()` first and the step under `skip_synchronize()`, so it reads
  the averaged gradients, as with DDP.
- A backward that reaches another optimizer's model (a GAN's generator loss runs through the
  discriminator) fires that optimizer's all-reduces too; `synchronize()` right after it completes
  them, or its next `zero_grad()` stops the run ("zero_grad() was called after loss.backward()").
- Broadcasts: rank 0's weights where DDP would wrap the model (after loading and initialisation);
  an optimizer's state only after the script loads it (a resume). A broadcast some ranks would
  never reach (the model built under a rank check, or in a class built there), or of parameters
  made channels_last (Horovod takes only contiguous tensors), leaves the file unchanged (MIG406). A fresh optimizer is not
  broadcast: it holds no state, and `hvd.broadcast_optimizer_state` would create one by stepping
  it once on zero gradients, which moves weights under weight decay and advances Adam's step count.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.episodes import environment_control
from migrate.analysis.gradients import last_change
from migrate.analysis.index import CallSite, Scope, descendants, read_names, spell
from migrate.analysis.sites import ModelSite
from migrate.analysis.syntax import argument, calls_in
from migrate.analysis.trained import Stepped, handed_out, optimizer_owners, passed_arguments, stepped_optimizers
from migrate.steps.base import Context, Wrapper, expression, statements
from migrate.steps.engine_refusals import rebinding_words
from migrate.steps.horovod_rebuilt import Rebuild, rebuilds, retire
from migrate.steps.horovod_synchronize import (
    Wrapped,
    block_position,
    crossing_backwards,
    in_header,
    synchronize_after_crossing_backwards,
    synchronize_before_reads,
    synchronize_leftovers,
)
from migrate.steps.rank_divergence import rank_divergent_control
from migrate.steps.shared_files import some_ranks_only
from migrate.steps.wrap_model import report_unwrapped_model, wrap_models

def broadcast_code(ctx: Context, site: ModelSite) -> str:
    hvd = ctx.module_name("horovod.torch", "hvd")
    return f"{hvd}.broadcast_parameters({site.spelling}.state_dict(), root_rank=0)  # every rank starts from rank 0's weights\n"


# MIG006: what Horovod itself is for and where it stops, said once per converted script
MAINTENANCE = ("Horovod's last release is 0.28.1 (2023): it does not build against torch >= 2.1 as published "
               "(see the README for the build that works); for a maintained stack convert the original with "
               "`migrate to-ddp`")

# Horovod leaves the model as it is: the user's module, reached without `.module`
BROADCAST_WRAPPER = Wrapper(code=broadcast_code, through_module=False)


def horovod_optimizers(ctx: Context) -> None:
    if _hangs_on_episodes(ctx):
        return
    _broadcasts_after_model_changes(ctx)
    wrapped = _optimizers(ctx)
    if wrapped is None or not _stepped_plainly(ctx, wrapped) or not _passes(ctx, wrapped) or not _broadcastable(ctx, wrapped):
        ctx.refused = True
        return
    rebuilt = _rebuilds(ctx, wrapped)
    if rebuilt is None:
        ctx.refused = True
        return
    crossings = crossing_backwards(ctx, wrapped)
    if crossings is None:
        ctx.refused = True
        return
    several = len(wrapped) > 1
    for optimizer in wrapped:
        _after_model_changes(ctx, optimizer)
        loaded = _broadcast_loaded_state(ctx, optimizer)
        _wrap(ctx, optimizer, several, loaded)
        for rebuild in rebuilt[id(optimizer)]:
            _wrap_rebuild(ctx, optimizer, rebuild, several)
        _plain_zero_grad(ctx, optimizer)
        synchronize_leftovers(ctx, optimizer)
        synchronize_before_reads(ctx, optimizer)
    synchronize_after_crossing_backwards(ctx, crossings)


def _hangs_on_episodes(ctx: Context) -> bool:
    """MIG121 first where each rank's own environment decides how many backward passes run (`while
    not done: agent.train_net()`): the converted script would hang whatever is wrapped, so that is
    what the user must change first, before any finding about the optimizer (steps.rank_divergence
    reports it here, with the rest of its findings, and refuses)."""
    if not any(divergence.hangs for divergence in environment_control(ctx.sites)):
        return False
    rank_divergent_control(ctx)
    return ctx.refused


def _broadcasts_after_model_changes(ctx: Context) -> None:
    """Each model's broadcast where DDP's wrap goes: after the last statement before training that
    still moves, casts or changes it (analysis.gradients.last_change)."""
    backward = [call.node for call in ctx.sites.backward_calls]
    sites = []
    for site in ctx.sites.models:
        changed = last_change(ctx.index, site, backward, ctx.sites.training_scopes)
        sites.append(site if changed is None else dataclasses.replace(site, wrap_before=None, wrap_after=changed))
    ctx.sites.models = sites


def _after_model_changes(ctx: Context, optimizer: Wrapped) -> None:
    """The wrap after the model it holds is moved or cast (`opt = Adam(m.parameters())`, then `if
    args.cuda: m.cuda()`): Horovod hooks each parameter's gradient when it wraps, and a parameter
    moved or cast after that loses its hook (every all-reduce then waits for `step()`). It goes
    after the model's broadcast point when that follows the construction in its block and nothing
    in between uses the optimizer."""
    built = ctx.index.statement_holding(optimizer.built)
    if optimizer.alternatives or built is None or _assigned_name(built, optimizer.built) is None:
        return
    block, position = block_position(ctx, built)
    owners = {o.spelling for o in optimizer.owners or []}
    points = {id(site.wrap_after) for site in ctx.sites.models if site.spelling in owners and site.wrap_after is not None}
    later = [i for i, stmt in enumerate(block or []) if i > position and id(stmt) in points]
    if block is None or not later or any(_uses(optimizer, stmt) for stmt in block[position + 1:max(later) + 1]):
        return
    if optimizer.wrap_after is None or not any(s is optimizer.wrap_after for s in block[max(later):]):
        optimizer.wrap_after = block[max(later)]
        optimizer.after_model = True


def _uses(optimizer: Wrapped, stmt: cst.BaseStatement) -> bool:
    """`stmt` reads the optimizer (`scheduler = StepLR(optimizer)`) or binds it again (`if args.resume:
    opt = restore(model, path)`, retired and wrapped again by steps.horovod_rebuilt)."""
    attributes = {spell(n) for n in descendants(stmt) if isinstance(n, cst.Attribute)}
    return bool(optimizer.spellings & (read_names(stmt) | attributes)) or _binds_any(stmt, optimizer.spellings)


def _broadcastable(ctx: Context, wrapped: list[Wrapped]) -> bool:
    """MIG406 where a broadcast cannot work: parameters made channels_last (Horovod refuses to
    broadcast or all-reduce a tensor that is not contiguous), or a broadcast some ranks never
    reach (the model built, or the optimizer loaded, under a rank check or in a class built there)."""
    models = {m.spelling for m in ctx.sites.models} | {o.spelling for w in wrapped for o in w.owners or []}
    for call in ctx.index.calls:
        func, memory = call.node.func, argument(call.node, "memory_format", 99)
        if memory is None or not isinstance(func, cst.Attribute) or "channels_last" not in ctx.code(memory.value):
            continue
        if spell(func.value) in models or set(ctx.index.targets_of(call.node)) & models:
            ctx.report("MIG406", f"`{ctx.code(call.node)}` makes the parameters channels_last: Horovod 0.28.1 broadcasts "
                       "and all-reduces only contiguous tensors (\"Tensor is required to be contiguous\"), so the first "
                       "broadcast or backward stops; keep the model contiguous (inputs may stay channels_last) or convert "
                       "with `migrate to-ddp`; the file is left unchanged", call.node)
            return False
    places = [site.wrap_before or site.wrap_after for site in ctx.sites.models]
    places += [call.place.stmt for call in ctx.index.calls if isinstance(call.node.func, cst.Attribute)
               and call.node.func.attr.value == "load_state_dict" and any(spell(call.node.func.value) in w.spellings for w in wrapped)]
    for place in places:
        if place is not None and some_ranks_only(ctx, place):
            ctx.report("MIG406", f"`{ctx.code(place).strip().splitlines()[0]}` runs on some ranks only (under a rank check, or "
                       "in a function or class built there): a broadcast from rank 0 after it would wait forever for the "
                       "ranks that never reach it; build the model and load its state on every rank; the file is left "
                       "unchanged", place)
            return False
    return True


def broadcast_models(ctx: Context) -> None:
    """Rank 0's weights to every rank: where DDP would wrap each trained model; for a model DDP
    could not wrap (trained through a method other than forward(), which Horovod's gradient hooks
    do not mind), `horovod_optimizers` broadcast the modules the optimizer holds."""
    if ctx.sites.models:
        wrap_models(ctx)
    elif not ctx.refused and not ctx.recorded(OwnersBroadcast, create=True).done:
        report_unwrapped_model(ctx)
        ctx.refused = True


@dataclass
class OwnersBroadcast:
    """horovod_optimizers broadcast the optimizers' modules after their wrap (no model site)."""

    done: bool = False


def maintenance_note(ctx: Context) -> None:
    if ctx.sites.models:
        site = ctx.sites.models[0]
        ctx.report("MIG006", MAINTENANCE, site.wrap_after or site.wrap_before)


def _optimizers(ctx: Context) -> list[Wrapped] | None:
    """The stepped optimizers, one entry per construction; None (after MIG402) when one cannot be wrapped."""
    by_built: dict[int, Wrapped] = {}
    for stepped in ctx.sites.stepped:
        rebound = rebinding_words(ctx, stepped.spelling, stepped.step) if stepped.built is None else None
        if rebound is not None:
            ctx.report("MIG402", f"`{stepped.spelling}` is stepped here, but {rebound}; otherwise wrap the optimizer it "
                       "returns in hvd.DistributedOptimizer(...) after that line by hand; the file is left unchanged",
                       stepped.step.node)
            return None
        if stepped.built is None:
            ctx.report("MIG402", f"`{stepped.spelling}` is stepped here, but the conversion cannot follow it back to the "
                       f"torch optimizer that builds it{_comes_from(ctx, stepped)}: wrap that optimizer in "
                       "hvd.DistributedOptimizer(...) where it is made; the file is left unchanged", stepped.step.node)
            return None
        entry = by_built.setdefault(id(stepped.built), Wrapped(stepped=[], built=stepped.built, owners=stepped.owners))
        entry.stepped.append(stepped)
        entry.spellings.add(stepped.spelling)
    if not by_built and len(ctx.sites.optimizers) == 1:
        by_built[0] = _only_construction(ctx, ctx.sites.optimizers[0])
        for handed in stepped_optimizers(ctx.index, ctx.sites.training_scopes, handed_in=True):
            by_built[0].stepped.append(handed)  # `scaler.step(self.optimizer)` of `kwargs["optimizer"]`: that one
            by_built[0].spellings.add(handed.spelling)
    if not by_built and ctx.sites.backward_calls:
        ctx.report("MIG402", "no torch optimizer is stepped after backward (the weights are updated by hand or by the "
                   "script's own class): Horovod averages gradients through hvd.DistributedOptimizer; the file is left "
                   "unchanged", ctx.sites.backward_calls[0].node)
        return None
    wrapped = list(by_built.values())
    for optimizer in wrapped:
        optimizer.alternatives = _alternatives(ctx, optimizer, by_built)
    return wrapped if _wrappable(ctx, wrapped) else None


def _alternatives(ctx: Context, optimizer: Wrapped, known: dict[int, Wrapped]) -> list[cst.BaseExpression]:
    """Other torch optimizer constructions bound to the name the construction is bound to, in its scope."""
    stmt = ctx.index.statement_holding(optimizer.built)
    name = _assigned_name(stmt, optimizer.built)
    site = ctx.index.call_site(optimizer.built) if isinstance(optimizer.built, cst.Call) else None
    if name is None or site is None:
        return []
    constructions = {id(call.node) for call in ctx.sites.optimizers}
    return [b.value for b in ctx.index.bindings_of_in(name, site.place.scope)
            if b.value is not None and b.value is not optimizer.built and id(b.value) in constructions
            and id(b.value) not in known]


def _comes_from(ctx: Context, stepped: Stepped) -> str:
    """` (it comes from `define_optimizer(...)`, line 77)`: where the stepped name was last bound."""
    scope = stepped.step.place.scope
    bindings = [b for b in ctx.index.bindings_of_in(stepped.spelling, scope) if b.value is not None]
    if not bindings:
        return ""
    value = bindings[-1].value
    assert value is not None
    shown = f"{spell(value.func)}(...)" if isinstance(value, cst.Call) and spell(value.func) else ctx.code(value).splitlines()[0][:60]
    return f" (it comes from `{shown}`, line {ctx.position(bindings[-1].place.stmt)[0]})"


def _stepped_plainly(ctx: Context, wrapped: list[Wrapped]) -> bool:
    """MIG402/MIG403 for a step Horovod cannot follow: a closure that runs backward itself (LBFGS),
    an optimizer the model builds over itself inside its own class (each instance builds one)."""
    for optimizer in wrapped:
        for call in ctx.index.calls:
            func = call.node.func
            if (isinstance(func, cst.Attribute) and func.attr.value == "step" and call.node.args
                    and spell(func.value) in optimizer.spellings):
                ctx.report("MIG403", f"`{ctx.code(call.node)}` steps with a closure that runs backward itself, "
                           "several times per step (LBFGS): hvd.DistributedOptimizer stops on the second; the file is "
                           "left unchanged", call.node)
                return False
        if any(o.spelling == "self" for o in optimizer.owners or []):
            ctx.report("MIG402", f"{_called(optimizer)} is built over `self.parameters()` inside the model's own class"
                       f"{_instances_collide(ctx, optimizer)}; the conversion wraps an optimizer only where the training "
                       "code builds it: build it outside the class, beside the model, and convert again; the file is "
                       "left unchanged", optimizer.built)
            return False
    return True


def _instances_collide(ctx: Context, optimizer: Wrapped) -> str:
    """`; `Agent` is built 2 times (lines 30, 31) ...`: the Horovod names of optimizers the class
    builds collide only when the script makes a second instance or a copy (a target network)."""
    site = ctx.index.call_site(optimizer.built) if isinstance(optimizer.built, cst.Call) else None
    cls = site.place.scope.class_name if site is not None else None
    if cls is None:
        return ""
    made = [c.node for c in ctx.index.calls if spell(c.node.func) == cls]
    copies = [c.node for c in ctx.index.calls if (ctx.index.qualify(c.node.func) or "") in ("copy.deepcopy", "copy.copy")]
    if len(made) > 1:
        lines = ", ".join(str(ctx.position(node)[0]) for node in made)
        return (f"; `{cls}` is built {len(made)} times (lines {lines}) and each instance builds one, so their Horovod "
                "names would collide")
    if made and copies:
        return (f"; `{ctx.code(copies[0])}` (line {ctx.position(copies[0])[0]}) copies it and each copy holds one, "
                "so their Horovod names would collide")
    return ""


def _only_construction(ctx: Context, call: CallSite) -> Wrapped:
    """The one torch optimizer the file builds, when the steps reach it through something the
    analysis does not follow (a tuple a helper returns, handed to a class that steps it)."""
    stmt = call.place.stmt
    name = _assigned_name(stmt, call.node)
    return Wrapped(stepped=[], built=call.node, owners=optimizer_owners(ctx.index, call.node, call.place.scope),
                   spellings={name} if name else set())


def _wrappable(ctx: Context, wrapped: list[Wrapped]) -> bool:
    seen: dict[tuple[str, int], Wrapped] = {}
    for optimizer in wrapped:
        rebuilt = next((b for b in (optimizer.built, *optimizer.alternatives) if _built_while_training(ctx, b)), None)
        if rebuilt is not None:
            ctx.report("MIG402", f"{_called(optimizer)} is built again in the training loop (`{ctx.code(rebuilt)[:60]}`): "
                       "each hvd.DistributedOptimizer hooks the parameters once more and their all-reduces collide; "
                       "build it once before training; the file is left unchanged", rebuilt)
            return False
        for owner in optimizer.owners or []:
            key = (owner.spelling, id(owner.scope))
            other = seen.setdefault(key, optimizer)
            if other is not optimizer:
                ctx.report("MIG402", f"two optimizers hold the parameters of `{owner.spelling}` "
                           f"({_called(other)} and {_called(optimizer)}): Horovod hooks "
                           "each parameter for one optimizer's all-reduce; the file is left unchanged", optimizer.built)
                return False
        if len(wrapped) > 1 and not _named(optimizer):
            ctx.report("MIG402", f"{_called(optimizer)} holds parameters this file cannot name (not "
                       "`<module>.parameters()`): with several optimizers Horovod needs names unique across them; "
                       "the file is left unchanged", optimizer.built)
            return False
    return True


def _called(optimizer: Wrapped) -> str:
    """How messages name an optimizer: as the script spells it, or as what builds it."""
    if optimizer.spellings:
        return f"`{sorted(optimizer.spellings)[0]}`"
    func = spell(optimizer.built.func) if isinstance(optimizer.built, cst.Call) else None
    return f"the `{func}(...)` optimizer" if func else "the optimizer"


def _built_while_training(ctx: Context, built: cst.BaseExpression) -> bool:
    """Inside a loop that trains: the training loops found, or any loop whose body runs a backward
    or calls a function that does (`for epoch in ...: train(); ... optimizer = ASGD(...)`)."""
    site = ctx.index.call_site(built) if isinstance(built, cst.Call) else None
    if site is None:
        return False
    training_loops = {loop.node for loop in ctx.sites.step_loops} | {e.loop.node for e in ctx.sites.epoch_loops}
    for loop in site.place.loops:
        if loop in training_loops:
            return True
        for call in calls_in(loop):
            name = spell(call.func) or ""
            if name in ctx.sites.training_scopes or name.endswith(".backward"):
                return True
    return False


def _named(optimizer: Wrapped) -> bool:
    """Whether every owner is spelled `<module>.parameters()`, so `named_parameters()` names them."""
    return bool(optimizer.owners) and all(
        isinstance(o.node, cst.Call) and isinstance(o.node.func, cst.Attribute)
        and o.node.func.attr.value in ("parameters", "named_parameters") for o in optimizer.owners or [])


def _passes(ctx: Context, wrapped: list[Wrapped]) -> bool:
    """backward_passes_per_step from each recognised accumulation; False after MIG403."""
    for code, message, node in ctx.sites.notes:
        if code == "MIG109":
            ctx.report("MIG403", f"gradient accumulation Horovod cannot be told about: {message}; "
                       "hvd.DistributedOptimizer stops the run on a second backward before the step unless "
                       "backward_passes_per_step says how many come; the file is left unchanged", node)
            return False
    for accumulation in ctx.sites.accumulations:
        optimizer = _optimizer_of(wrapped, accumulation.model)
        factor = ctx.code(accumulation.factor)
        where = ctx.index.statement_holding(optimizer.built) if optimizer is not None else None
        if optimizer is not None and where is not None and not _known_at(ctx, accumulation.factor, where):
            optimizer.wrap_after = _where_known(ctx, optimizer, accumulation.factor, where)
        if optimizer is None or where is None or not (_known_at(ctx, accumulation.factor, where) or optimizer.wrap_after):
            place = f" (line {ctx.position(where)[0]})" if where is not None else ""
            ctx.report("MIG403", f"gradient accumulation every `{factor}` backward passes: hvd.DistributedOptimizer needs "
                       f"backward_passes_per_step={factor} where the optimizer is built{place}, where `{factor}` is not "
                       "known; the file is left unchanged", accumulation.step_if or accumulation.last)
            return False
        optimizer.passes = factor
    return True


def _where_known(ctx: Context, optimizer: Wrapped, value: cst.BaseExpression,
                 built: cst.BaseStatement) -> cst.BaseStatement | None:
    """A later statement of the construction's block after which `value` is known, when nothing in
    between uses the optimizer (`optimizer = AdamW(...)`, then `accumulation_steps = 4`)."""
    if optimizer.alternatives or _assigned_name(built, optimizer.built) is None:
        return None
    block, position = block_position(ctx, built)
    if block is None:
        return None
    for later in block[position + 1:]:
        if _uses(optimizer, later):
            return None
        if not isinstance(later, cst.SimpleStatementLine):
            return None
        if _known_at(ctx, value, _next_statement(block, later) or later) and _binds_any(later, read_names(value)):
            return later
    return None


def _next_statement(block: list[cst.BaseStatement], stmt: cst.BaseStatement) -> cst.BaseStatement | None:
    position = next(i for i, s in enumerate(block) if s is stmt)
    return block[position + 1] if position + 1 < len(block) else None


def _binds_any(stmt: cst.BaseStatement, names: set[str]) -> bool:
    return any(spell(t.target) in names for t in descendants(stmt) if isinstance(t, cst.AssignTarget))


def _optimizer_of(wrapped: list[Wrapped], model: str) -> Wrapped | None:
    if len(wrapped) == 1:
        return wrapped[0]
    held = [w for w in wrapped if any(o.spelling == model for o in w.owners or [])]
    return held[0] if len(held) == 1 else None


def _known_at(ctx: Context, value: cst.BaseExpression, stmt: cst.BaseStatement) -> bool:
    """Whether every name `value` reads is bound before `stmt` in its function, or at module level."""
    scope = _scope_of(ctx, stmt)
    if scope is None:
        return False
    order = ctx.index.statement_order()
    here = order.get(stmt, 0)
    for name in read_names(value):
        if name in scope.params or name in ("int", "max", "min", "len", "round"):
            continue
        earlier = [b for b in ctx.index.bindings_of_in(name, scope) if order.get(b.place.stmt, here) < here]
        if not earlier and not ctx.index.module_bindings_of(name) and name not in ctx.index.imports:
            return False
    return True


def _scope_of(ctx: Context, stmt: cst.BaseStatement) -> Scope | None:
    for call in calls_in(stmt):
        site = ctx.index.call_site(call)
        if site is not None:
            return site.place.scope
    return None


def _in_the_caller(ctx: Context, optimizer: Wrapped) -> tuple[cst.BaseStatement, str, Wrapped] | None:
    """An optimizer a function of this file builds and returns in a tuple its only caller unpacks
    (`g_opt, d_opt = make_optimizers(g, d, cfg)`): the caller's line, its name for the optimizer, and
    the optimizer with its models as the caller spells them (the arguments it passes), so that the
    wrap goes after that line, outside the function; None where any of that cannot be told."""
    handed = handed_out(ctx.index, optimizer.built) if not optimizer.alternatives and not optimizer.wrap_after else None
    if handed is None or not _named(optimizer):
        return None
    call, name = handed
    owners = []
    for owner in optimizer.owners or []:
        passed = passed_arguments(ctx.index, owner.scope, owner.spelling) if owner.spelling in owner.scope.params else []
        spelled = [spell(value) for value, caller in passed if caller is call.place.scope]
        if len(spelled) != 1 or spelled[0] is None:
            return None
        owners.append(dataclasses.replace(owner, spelling=spelled[0], scope=call.place.scope))
    return call.place.stmt, name, dataclasses.replace(optimizer, owners=owners)


def _wrap(ctx: Context, optimizer: Wrapped, several: bool, loaded: bool) -> None:
    hvd = ctx.module_name("horovod.torch", "hvd")
    caller = _in_the_caller(ctx, optimizer)
    arguments = _named_parameters(ctx, caller[2] if caller else optimizer, several)
    if optimizer.passes is not None:
        arguments += f", backward_passes_per_step={optimizer.passes}"
    target = None
    for built in (optimizer.built, *optimizer.alternatives):
        stmt = ctx.index.statement_holding(built)
        target = _assigned_name(stmt, built)
        if caller is not None:
            stmt, target = caller[0], caller[1]
        if target is not None and stmt is not None:
            ctx.plan.insert_after(optimizer.wrap_after or stmt, statements(f"{target} = {hvd}.DistributedOptimizer({target}{arguments})\n"
                                                   + _owner_broadcasts(ctx, optimizer)))
        else:
            wrapped = expression(f"{hvd}.DistributedOptimizer(__built__{arguments})")
            ctx.plan.replace(built, functools.partial(_filled, wrapped))
    accumulation = f" (backward_passes_per_step={optimizer.passes})" if optimizer.passes else ""
    state = ("its state is broadcast from rank 0 after the script loads it" if loaded else
             "its state is not broadcast: a fresh optimizer holds none, and hvd.broadcast_optimizer_state would create "
             "it by stepping once on zero gradients (moving weights under weight decay, advancing Adam's step count)")
    moved = ""
    if optimizer.after_model and optimizer.wrap_after is not None:
        moved = (f" after line {ctx.position(optimizer.wrap_after)[0]}, where its model is last moved or cast (a parameter "
                 "moved or cast after the wrap loses the hook that starts its all-reduce during backward)")
    ctx.report("MIG401", f"{f'`{target}`' if target else _called(optimizer)} wrapped in hvd.DistributedOptimizer{accumulation}"
               f"{moved}, which averages its gradients across ranks during backward; {state}", optimizer.built)


def _rebuilds(ctx: Context, wrapped: list[Wrapped]) -> dict[int, list[Rebuild]] | None:
    """Each optimizer's rebuilds during training (steps.horovod_rebuilt); None after MIG402 for one
    that cannot be wrapped, or whose parameters cannot be named beside other optimizers."""
    found: dict[int, list[Rebuild]] = {}
    for optimizer in wrapped:
        lines = rebuilds(ctx, optimizer)
        if lines is None:
            return None
        for line in lines:
            if line.built is not None and len(wrapped) > 1 and not _named(_as_built(ctx, optimizer, line.built)):
                ctx.report("MIG402", f"`{line.target}` is built again over parameters this file cannot name (not "
                           "`<module>.parameters()`): with several optimizers Horovod needs names unique across them; "
                           "the file is left unchanged", line.built)
                return None
        found[id(optimizer)] = lines
    return found


def _as_built(ctx: Context, optimizer: Wrapped, built: cst.Call) -> Wrapped:
    """The optimizer as a rebuild makes it: the parameters that construction holds."""
    site = ctx.index.call_site(built)
    owners = optimizer_owners(ctx.index, built, site.place.scope) if site is not None else None
    return dataclasses.replace(optimizer, built=built, owners=owners, alternatives=[], stepped=[])


def _wrap_rebuild(ctx: Context, optimizer: Wrapped, rebuild: Rebuild, several: bool) -> None:
    """The replaced optimizer retired before the line; a torch optimizer built there wrapped after it
    as the first one is (its own parameters' names, the same backward_passes_per_step). Its state is
    not broadcast: fresh, it holds none, and every rank's parameters are already equal."""
    retire(ctx, rebuild)
    retired = ("the optimizer it replaces is retired first with set_backward_passes_per_step(sys.maxsize), since "
               "Horovod cannot take that one's gradient hooks off and they would all-reduce under the same names")
    fresh = ("its state is not broadcast: a fresh optimizer holds none, and the parameters are already equal on "
             "every rank")
    if rebuild.built is None and not rebuild.returned:
        ctx.report("MIG401", f"`{rebuild.target}` is bound again to a new hvd.DistributedOptimizer here; {retired}; "
                   f"{fresh}", rebuild.stmt)
        return
    hvd = ctx.module_name("horovod.torch", "hvd")
    named = optimizer if rebuild.built is None else _as_built(ctx, optimizer, rebuild.built)
    arguments = _named_parameters(ctx, named, several)
    if optimizer.passes is not None:
        arguments += f", backward_passes_per_step={optimizer.passes}"
    loads = rebuild.built is None and _helper_loads_state(ctx, rebuild.stmt)
    broadcast = (f"{hvd}.broadcast_optimizer_state({rebuild.target}, root_rank=0)  # every rank resumes from rank 0's "
                 "optimizer state\n") if loads else ""
    ctx.plan.insert_after(rebuild.stmt, statements(
        f"{rebuild.target} = {hvd}.DistributedOptimizer({rebuild.target}{arguments})\n" + broadcast))
    accumulation = f" (backward_passes_per_step={optimizer.passes})" if optimizer.passes else ""
    if rebuild.built is None:
        state = ("the state that call loads is then broadcast from rank 0" if loads
                 else "its state is what that call gives every rank")
        ctx.report("MIG401", f"`{rebuild.target}` bound again to the optimizer `{ctx.code(getattr(rebuild.stmt.body[0], 'value'))[:60]}` "
                   f"returns is wrapped in hvd.DistributedOptimizer too, over the same parameters' names{accumulation}; "
                   f"{retired}; {state}", rebuild.stmt)
        return
    ctx.report("MIG401", f"`{rebuild.target}` built again during training is wrapped in hvd.DistributedOptimizer "
               f"too{accumulation}; {retired}; {fresh}", rebuild.built)


def _helper_loads_state(ctx: Context, stmt: cst.BaseStatement) -> bool:
    """`opt = restore(net, path)`, where `restore` is a function of this file that loads a state
    dict into the optimizer it returns (`fresh.load_state_dict(...)`; `return fresh`)."""
    value = getattr(stmt.body[0], "value", None) if isinstance(stmt, cst.SimpleStatementLine) else None
    name = spell(value.func) if isinstance(value, cst.Call) else None
    function = ctx.index.functions.get(name or "")
    if function is None or not isinstance(function.node, cst.FunctionDef):
        return False
    body = list(descendants(function.node.body))
    returned = {node.value.value for node in body if isinstance(node, cst.Return) and isinstance(node.value, cst.Name)}
    return any(isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "load_state_dict"
               and isinstance(node.func.value, cst.Name) and node.func.value.value in returned for node in body)


def _owner_broadcasts(ctx: Context, optimizer: Wrapped) -> str:
    """With no model site (DDP could not wrap the model), the modules the optimizer holds are
    broadcast right after its wrap."""
    if ctx.sites.models or not _named(optimizer):
        return ""
    hvd = ctx.module_name("horovod.torch", "hvd")
    ctx.recorded(OwnersBroadcast, create=True).done = True
    return "".join(f"{hvd}.broadcast_parameters({o.spelling}.state_dict(), root_rank=0)  # every rank starts from rank 0's weights\n"
                   for o in {o.spelling: o for o in optimizer.owners or []}.values())


def _filled(template: cst.BaseExpression, built: cst.CSTNode) -> cst.BaseExpression:
    assert isinstance(template, cst.Call)
    return template.with_changes(args=[template.args[0].with_changes(value=built), *template.args[1:]])


def _named_parameters(ctx: Context, optimizer: Wrapped, several: bool) -> str:
    """`, named_parameters=model.named_parameters()`; with several optimizers, prefixed by the model."""
    owners = list({o.spelling: o for o in optimizer.owners or []}.values())  # param groups over one model: once
    if not _named(optimizer):
        return ""  # one optimizer: Horovod names the parameters by their place in it
    parts = [f'{o.spelling}.named_parameters(prefix="{o.spelling}")' if several or len(owners) > 1
             else f"{o.spelling}.named_parameters()" for o in owners]
    if len(parts) == 1:
        return f", named_parameters={parts[0]}"
    chain = ctx.module_name("itertools")
    return f", named_parameters={chain}.chain({', '.join(parts)})"


def _assigned_name(stmt: cst.BaseStatement | None, built: cst.BaseExpression) -> str | None:
    """`optimizer` for a line that is only `optimizer = <built>`."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and small.value is built:
        return spell(small.targets[0].target)
    if isinstance(small, cst.AnnAssign) and small.value is built:
        return spell(small.target)
    return None


def _broadcast_loaded_state(ctx: Context, optimizer: Wrapped) -> bool:
    """After each `optimizer.load_state_dict(...)`, every rank takes rank 0's optimizer state."""
    hvd = ctx.module_name("horovod.torch", "hvd")
    loaded = False
    for call in ctx.index.calls:
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict"):
            continue
        owner = spell(func.value)
        if owner in optimizer.spellings and not in_header(ctx, call):
            ctx.plan.insert_after(call.place.stmt, statements(
                f"{hvd}.broadcast_optimizer_state({owner}, root_rank=0)  # every rank resumes from rank 0's optimizer state\n"))
            loaded = True
    return loaded


def _plain_zero_grad(ctx: Context, optimizer: Wrapped) -> None:
    """Horovod 0.28.1's `zero_grad()` takes no arguments (torch's `set_to_none=` came later):
    `set_to_none=True`, torch's default, is dropped; another value calls torch's own method."""
    for call in ctx.index.calls:
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "zero_grad" and call.node.args):
            continue
        owner = spell(func.value)
        if owner not in optimizer.spellings:
            continue
        value = call.node.args[0].value
        if isinstance(value, cst.Name) and value.value == "True":
            ctx.plan.replace(call.node, lambda updated: updated.with_changes(args=[]))
            ctx.report("MIG004", "`set_to_none=True` dropped: Horovod 0.28.1's zero_grad() takes no argument, and "
                       "True is torch's default", call.node)
        else:
            plain = expression(f"{ctx.torch}.optim.Optimizer.zero_grad({owner}, set_to_none={ctx.code(value)})")
            ctx.plan.replace_with(call.node, plain)


