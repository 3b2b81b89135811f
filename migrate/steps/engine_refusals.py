"""Why no DeepSpeed engine can be built for a script, said in the script's own words (MIG104,
MIG113, MIG114, MIG129): the models and optimizers seen, and what stands in the way of the one
`deepspeed.initialize(model=..., optimizer=...)` the conversion writes. Also where the engine puts
a model the script's batches may not follow (migrate.steps.deepspeed_engine decides): DeepSpeed kept
on the CPU with a model the script never moves (MIG130, a note), and a model moved only under an
`if`, or not moved while another is, which the engine still moves to the GPU (MIG131).

An optimizer bound again by a call the conversion does not follow (`G, opt_g = load_resume(G, opt_g,
path)`) is named at that binding, the one that blocks, not at its first construction
(`rebinding_words`, shared with Horovod's MIG402).
"""

from __future__ import annotations


import libcst as cst

from migrate.analysis.index import Binding, CallSite, ScriptIndex, spell
from migrate.analysis.ordering import ModelOrdering, NoModelOrdering, Unordered
from migrate.analysis.sites import ModelSite
from migrate.analysis.syntax import calls_in, contains
from migrate.analysis.upstream import construction
from migrate.steps.base import Context
from migrate.steps.wrap_model import report_unwrapped_model

LEFT = "the file is left unchanged"


def report_no_engine(ctx: Context, ordering: NoModelOrdering) -> None:
    """The finding for the reason the engine has no place."""
    first = ctx.sites.backward_calls[0].node if ctx.sites.backward_calls else None
    models = ordering.models
    reason = ordering.reason
    if reason is Unordered.NO_MODEL:
        report_unwrapped_model(ctx)
    elif reason is Unordered.SEVERAL_MODELS:
        _report_several_models(ctx, models, first)
    elif reason is Unordered.SEVERAL_OPTIMIZERS:
        names = " and ".join(f"`{o}`" for o in ordering.optimizers)
        ctx.report("MIG129", f"{names} each step parameters of `{models[0].spelling}`; one DeepSpeed engine takes one "
                   "optimizer: put them into one optimizer with a param group each, then convert again; " + LEFT, first)
    elif reason is Unordered.OPTIMIZER_REBUILT and ordering.seen is not None:
        line = ctx.position(ordering.seen)[0]
        scope = ctx.index.scope_of.get(ordering.seen)
        called = scope is not None and scope is not models[0].scope
        where = f", in `{scope.name}()`, which the training loop calls" if called and scope is not None else ""
        ctx.report("MIG129", f"`{ordering.optimizers[0]}` is built again during training (line {line}{where}: "
                   f"`{first_line(ctx, ordering.seen)}`); a DeepSpeed engine keeps the optimizer it was given, so the "
                   f"new one would never step; {LEFT}", ordering.seen)
    elif reason is Unordered.NO_OPTIMIZER:
        _report_no_optimizer(ctx, models[0], first)
    else:
        _report_optimizer_elsewhere(ctx, models[0], first)


def _report_optimizer_elsewhere(ctx: Context, model: ModelSite, first: cst.CSTNode | None) -> None:
    """MIG114, naming where the stepped optimizer is built, where the model is, and the call the
    model is handed to (`RF(model)`, `setup(model=model)`) when the optimizer is built behind it."""
    where = "at module level" if model.scope.is_module else f"in `{model.scope.name}()`"
    handed = _handed_to(ctx, model)
    for stepped in ctx.sites.stepped:
        binding = next(iter(ctx.index.bindings_of(stepped.spelling)), None)
        if binding is not None:
            built = "at module level" if binding.place.scope.is_module else f"in `{binding.place.scope.name}()`"
            given = (f"handed to `{first_line(ctx, handed)}` (line {ctx.position(handed)[0]}), which this conversion "
                     "does not follow to the optimizer" if handed is not None else "not handed to that function")
            ctx.report("MIG114", f"`{stepped.spelling}` is built {built} (line {ctx.position(binding.place.stmt)[0]}) "
                       f"while `{model.spelling}` is built {where} and {given}: the engine needs "
                       f"both in one place; build the optimizer beside the model (and hand it on), then convert "
                       f"again; {LEFT}", first)
            return
    names = ", ".join(f"`{stepped.spelling}`" for stepped in ctx.sites.stepped) or "the optimizer stepped in training"
    behind = (f"; `{model.spelling}` is handed to `{first_line(ctx, handed)}` (line {ctx.position(handed)[0]}), and the "
              "optimizer is built behind that call" if handed is not None else "")
    ctx.report("MIG114", f"{names} is not built beside `{model.spelling}` ({where}){behind}: the engine needs the model "
               f"and its optimizer in one place; build the optimizer beside the model (and hand it on), then convert "
               f"again, or pass it to deepspeed.initialize by hand; {LEFT}", first)


def _handed_to(ctx: Context, model: ModelSite) -> cst.BaseStatement | None:
    """The first statement after the model is built, in its scope, that hands the model to a call
    (`rf = RF(model)`, `opt = setup(0.1, model=model)`)."""
    anchor = model.wrap_after or model.wrap_before
    built = ctx.position(anchor)[0] if anchor is not None else 0
    for call in ctx.index.calls:
        if call.place.scope is not model.scope or ctx.position(call.node)[0] < built:
            continue
        if any(spell(arg.value) == model.spelling for arg in call.node.args):
            return call.place.stmt
    return None


def _report_several_models(ctx: Context, models: tuple[ModelSite, ...], first: cst.CSTNode | None) -> None:
    """Models that share one optimizer (an encoder and a decoder) or each have their own (a GAN)."""
    names = ", ".join(f"`{m.spelling}`" for m in models)
    shared = [s for s in ctx.sites.stepped if s.owners and len({o.spelling for o in s.owners}) > 1]
    if shared:
        owners = " and ".join(dict.fromkeys(f"`{o.spelling}`" for o in shared[0].owners or ()))
        ctx.report("MIG113", f"{owners} are trained by one optimizer, `{shared[0].spelling}`; one DeepSpeed engine over "
                   "them (a ModuleDict of the modules) is built only when each is a plain name bound beside that "
                   f"optimizer, in one block, and the optimizer holds nothing else; {LEFT}", first)
        return
    optimizers = ", ".join(f"`{s.spelling}`" for s in ctx.sites.stepped)
    with_their_own = f" with the optimizers {optimizers}" if len(ctx.sites.stepped) > 1 else ""
    untold = next((s for s in ctx.sites.stepped if s.owners is None), None)
    binding = next(iter(ctx.index.bindings_of(untold.spelling)), None) if untold is not None else None
    rebound = rebinding_words(ctx, untold.spelling, untold.step) if untold is not None else None
    if untold is not None and rebound is not None:
        why = f"which model's parameters `{untold.spelling}` holds cannot be told here: {rebound}"
    elif untold is not None and binding is not None:
        line = ctx.position(binding.place.stmt)[0]
        why = (f"which model's parameters `{untold.spelling}` holds cannot be told here (it is bound at line {line}: "
               f"`{first_line(ctx, binding.place.stmt)}`): build each optimizer from its model's parameters beside it")
    else:
        why = "no optimizer holds the parameters of exactly one of them"
    ctx.report("MIG113", f"{len(models)} models are trained ({names}){with_their_own}, and one DeepSpeed engine per model "
               f"needs an optimizer of its own for each: {why}; {LEFT}", first)


def rebinding_words(ctx: Context, name: str, used: CallSite) -> str | None:
    """`it is bound again at line 9 (`G, opt_g = load_resume(G, opt_g, path)`) ...`: the words for
    the last binding of `name` above `used`, in its scope, when that binding is not the optimizer's
    construction but the result of a call (unpacked or not), with what would let the conversion
    follow it; None for any other binding."""
    binding = _reaching_binding(ctx, name, used)
    if binding is None or not isinstance(binding.node.value, cst.Call):
        return None
    call = binding.node.value
    if binding.value is not None and (ctx.index.qualify(call.func) or "").startswith("torch.optim."):
        return None
    func = spell(call.func) or ctx.code(call.func)
    stmt = binding.place.stmt
    line = ctx.position(stmt)[0]
    taken = any(spell(arg.value) == name for arg in call.args)
    unseen = "" if func in ctx.index.functions else " (not defined in this file)"
    words = (f"it is bound again at line {line} (`{first_line(ctx, stmt)}`) to what `{func}(...)`{unseen} returns, "
             "and the conversion cannot follow that back to a torch optimizer")
    if not taken:
        return words + f"; build the optimizer in this file after line {line}, then convert again"
    kept = _without_target(ctx, binding.node, name)
    return (words + f"; if `{func}` hands back the optimizer it is given (as a resume helper does), keep `{name}` "
            f"out of that assignment (`{kept}`) and convert again")


def _reaching_binding(ctx: Context, name: str, used: CallSite) -> Binding | None:
    """The last binding of `name` in the scope of `used` that comes before it in the file."""
    line = ctx.position(used.node)[0]
    before = [b for b in ctx.index.bindings_of_in(name, used.place.scope) if ctx.position(b.place.stmt)[0] < line]
    return before[-1] if before else None


def _without_target(ctx: Context, assign: cst.Assign | cst.AnnAssign, name: str) -> str:
    """The assignment with `name` replaced by `_` in a tuple target, or the bare call for a lone one."""
    target = assign.targets[-1].target if isinstance(assign, cst.Assign) else assign.target
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(assign, cst.Assign):
        elements = [e.with_changes(value=cst.Name("_")) if spell(e.value) == name else e for e in target.elements]
        kept = assign.with_changes(targets=[cst.AssignTarget(target=target.with_changes(elements=elements))])
        return ctx.code(kept).strip()
    return ctx.code(assign.value).strip() if assign.value is not None else name


def first_line(ctx: Context, stmt: cst.BaseStatement) -> str:
    """The statement's own first line (without the comments above it), as a message quotes it."""
    return ctx.code(stmt.with_changes(leading_lines=())).strip().splitlines()[0]


def _report_no_optimizer(ctx: Context, model: ModelSite, first: cst.CSTNode | None) -> None:
    """No `optimizer.step()` after the backward: a class of the script's own steps the torch
    optimizer, or the parameters are updated by hand."""
    index = ctx.index
    holder = _optimizer_holder(index, model)
    if holder is not None:
        binding, cls = holder
        use = next((u for u in index.attributes if u.owner == binding.target and u.called
                    and u.place.scope.name in ctx.sites.training_scopes and u.node.attr.value != "zero_grad"), None)
        through = f", stepped through `{binding.target}.{use.node.attr.value}()`" if use is not None else ""
        ctx.report("MIG129", f"`{binding.target}` is a `{cls}` (a class of this file) around the torch optimizer{through}; "
                   "a DeepSpeed engine steps the torch optimizer itself (engine.step() after engine.backward()): "
                   f"hand the inner optimizer to deepspeed.initialize and call engine.step() by hand; {LEFT}",
                   use.node if use is not None else binding.place.stmt)
        return
    update = _hand_update(ctx)
    if update is not None:
        ctx.report("MIG129", f"no optimizer is stepped: the parameters are updated by hand (`{ctx.code(update)}`); a "
                   "DeepSpeed engine steps a torch optimizer: build one over the model's parameters, step it after "
                   f"the backward, then convert again; {LEFT}", update)
        return
    ctx.report("MIG129", f"no optimizer is stepped after the backward (no `optimizer.step()` in the training code); a "
               f"DeepSpeed engine needs the torch optimizer that trains `{model.spelling}`; {LEFT}", first)


def _optimizer_holder(index: ScriptIndex, model: ModelSite) -> tuple[Binding, str] | None:
    """`opt = ScheduledOptim(torch.optim.Adam(model.parameters()), ...)`: a binding in the model's
    scope of an instance of a class of this file built around a torch optimizer."""
    for binding in index.bindings:
        value = binding.value
        if binding.place.scope is not model.scope or not isinstance(value, cst.Call):
            continue
        cls = spell(value.func) or ""
        if cls not in index.classes:
            continue
        if any((index.qualify(call.func) or "").startswith("torch.optim.") for call in calls_in(value)):
            return binding, cls
        given = {spell(arg.value) for arg in value.args}
        if any(b.target in given and isinstance(b.value, cst.Call)
               and (index.qualify(b.value.func) or "").startswith("torch.optim.") for b in index.bindings):
            return binding, cls
    return None


def _hand_update(ctx: Context) -> cst.CSTNode | None:
    """A statement of the training code that changes tensors in place from their `.grad`
    (`p -= lr * p.grad`, `p.data.add_(p.grad, alpha=-lr)`)."""
    def reads_grad(node: cst.CSTNode) -> bool:
        return contains(node, lambda n: isinstance(n, cst.Attribute) and n.attr.value == "grad")

    for stmt in ctx.index.block_of:
        if not isinstance(stmt, cst.SimpleStatementLine) or ctx.index.scope_of[stmt].name not in ctx.sites.training_scopes:
            continue
        for small in stmt.body:
            if isinstance(small, cst.AugAssign) and reads_grad(small.value):
                return small
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and reads_grad(small.value):
                func = small.value.func
                if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                    return small
    return None


def held_optimizer_usable(ctx: Context, engine: ModelOrdering) -> bool:
    """DeepSpeed's optimizer inside the script's own class, which steps it (engine.step() never
    runs): measured equal at ZeRO 0-3 for a plain step; a GradScaler, clipping or accumulation
    need the engine's own step (MIG129)."""
    if engine.stepped_by is None:
        return True
    side = engine.side
    seen = ("a GradScaler" if side.scaler_bindings else "gradient clipping" if side.clip_calls
            else "gradient accumulation" if ctx.sites.accumulations else None)
    if seen is None:
        return True
    holder, _, _attribute = engine.optimizer.rpartition(".")
    ctx.report("MIG129", f"`{holder}` is an object of the script's own class that steps the torch optimizer "
               f"(`{holder}.{engine.stepped_by}()`); DeepSpeed's optimizer can take its place there only when nothing "
               f"needs the engine's own step, and this script uses {seen}; {LEFT}", engine.anchor)
    return False


def several_engines_usable(ctx: Context, engines: tuple[ModelOrdering, ...]) -> bool:
    """One engine per model is converted for plain float32 or autocast steps; a GradScaler,
    gradient clipping or accumulation across several engines is not (MIG113 says which)."""
    if len(engines) < 2:
        return True
    side = engines[0].side
    seen: list[tuple[str, cst.CSTNode]] = []
    if side.scaler_bindings:
        seen.append((f"a GradScaler (`{side.scaler_bindings[0].target}`)", side.scaler_bindings[0].node))
    if side.clip_calls:
        seen.append((f"gradient clipping (`{ctx.code(side.clip_calls[0].node.func)}`)", side.clip_calls[0].node))
    if ctx.sites.accumulations:
        seen.append(("gradient accumulation", ctx.sites.accumulations[0].condition))
    if not seen:
        return True
    names = " and ".join(f"`{e.model.spelling}`" for e in engines)
    what, node = seen[0]
    ctx.report("MIG113", f"{names} each train with their own optimizer, and the step uses {what}; one DeepSpeed engine per "
               f"model is converted only without a GradScaler, clipping or accumulation; {LEFT}", node)
    return False


def report_kept_on_cpu(ctx: Context, site: ModelSite) -> None:
    """MIG130 at the statement that builds the model DeepSpeed is kept on the CPU with."""
    model = site.spelling
    ctx.report("MIG130", f"`{model}` is never moved to a device: the script keeps the model and its batches on the CPU, so "
               "DeepSpeed is kept there too (`DS_ACCELERATOR=cpu` before `import deepspeed`, the gloo backend); on a GPU "
               "host its engine would otherwise move the model to the GPU at `deepspeed.initialize` while the batches stay "
               "on the CPU. To train on GPUs, put the model and its batches on a device "
               '(`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`, '
               f"`{model}.to(device)`, `x, y = x.to(device), y.to(device)`) and convert again", _built_at(ctx, site))


def report_moved_under_condition(ctx: Context, site: ModelSite, condition: cst.If) -> None:
    """MIG131 at the `if` the model's move depends on."""
    ctx.report("MIG131", f"`{site.spelling}` is moved to a device only under `if {ctx.code(condition.test)}:` (line "
               f"{ctx.position(condition)[0]}): with the condition false on a GPU host, DeepSpeed's engine still moves "
               "the model to the GPU at `deepspeed.initialize` while the batches stay on the CPU, so the first forward "
               "would fail there; make the move unconditional, or run the converted script only with the condition "
               "true on a GPU host", condition)


def report_some_moved(ctx: Context, site: ModelSite, moved: ModelSite) -> None:
    """MIG131 at the statement that builds a model never moved while another one is."""
    model = site.spelling
    ctx.report("MIG131", f"`{model}` is never moved to a device while `{moved.spelling}` is: on a GPU host DeepSpeed's "
               f"engine moves `{model}` to the GPU at `deepspeed.initialize` too while its batches stay on the CPU, so "
               f"its first forward would fail there; move `{model}` and its batches where `{moved.spelling}` goes",
               _built_at(ctx, site))


def _built_at(ctx: Context, site: ModelSite) -> cst.CSTNode | None:
    built = construction(ctx.index, site.spelling, site.scope)
    return built.place.stmt if built is not None else site.wrap_after or site.wrap_before
