"""The engine runs the optimizer side of each step: `loss.backward()` -> `engine.backward(loss)`,
`optimizer.step()` -> `engine.step()`, `zero_grad()` removed (the engine clears gradients).

What the engine takes over from the script goes: AMP's GradScaler (DeepSpeed scales the loss
itself), `clip_grad_norm_` (the config's gradient_clipping).

Mixed precision is DeepSpeed's `torch_autocast` config section, never its `fp16`/`bf16` modes.
Those cast the module's weights to half precision when the engine is built
(deepspeed/runtime/engine.py `_configure_distributed_model` -> `_cast_module_mixed_precision`) and
leave the inputs alone (only `fp16.auto_cast` casts them, and bf16 has no such switch), so a
script written for torch AMP, whose batches stay float32, fails in its first Linear (`mat1 and
mat2 must have the same dtype`). `torch_autocast` is torch AMP itself: the weights and the
optimizer stay float32, the engine runs its forward under `torch.autocast` with the config's dtype
(engine.py `forward` -> runtime/torch_autocast.py `autocast_if_enabled`), and for float16 the ZeRO
optimizers, or the engine without ZeRO, keep a `torch.amp.GradScaler` of their own. DeepSpeed
0.19.8 does not refuse fp16/bf16 together with torch_autocast, but its design (PR #6993) keeps
them apart, and with fp16 a ZeRO optimizer would hold two loss scalers; so both stay off.

The script's own autocast block is kept when it computes in the config's precision: inside the
engine's forward the config decides anyway (autocast_if_enabled switches to its dtype), and what
the block holds outside the forward, the loss above all, keeps the precision it had (a
cross-entropy on bfloat16 logits is upcast to float32 by autocast, not outside it). A block of
another precision (`--fp32`, or `--fp16` on a bfloat16 script) is removed: the config alone
decides. The script's `enabled=` switch overwrites `torch_autocast.enabled`.

DeepSpeed 0.19.8's ZeRO optimizers (stages 1-3) mishandle the float16 GradScaler: a step that
overflows returns before the scaler's `update()` (stage_1_and_2.py and stage3.py `step`), so the
scale never backs off and every later step is skipped too, and clipping divides the scaled norm by
DeepSpeed's own loss scale (1.0), not the scaler's. Without ZeRO the engine unscales, clips, steps
and updates as torch AMP does. So float16 under ZeRO is reported (MIG126); bfloat16 needs no scaler.

With gradient accumulation the engine runs `engine.step()` after every backward and steps the
optimizer only on an accumulation boundary; the script's own `loss / accum_steps` is kept
(`scale_wrt_gas=False`). The boundary is the script's own `if` test, handed to
`engine.set_gradient_accumulation_boundary(...)` before each backward: the engine's own count
(`(micro_steps + 1) % gradient_accumulation_steps`, engine.py `is_gradient_accumulation_boundary`)
runs on across epochs while a test on the loop's step restarts each epoch, so with epochs of a
length that is not a multiple of N the two step at different micro-steps. With the boundary set,
backward reduces the gradients only at the boundary (or partitions them every micro-step, ZeRO
2/3) and `step()` updates only there, however many micro-steps the window held: an epoch's
leftover micro-steps are added to the next epoch's first update, as the original does when it
does not clear them. A `zero_grad()` that clears them (one at the start of each epoch) has no
DeepSpeed counterpart, and a test that cannot be read before the backward keeps the engine's count:
both are reported (MIG126).

Several backwards into one engine before its one step (a GAN's discriminator on real, then fake
samples) would each be a boundary: at ZeRO 1-2 the gradients reduced at a boundary replace those
of the backward before, so only the last loss would train (measured: the discriminator equals a
run on the fake loss alone; ZeRO 0 and 3 add them). All but the last are marked inside the window
(`set_gradient_accumulation_boundary(False)`), the last ends it (`(True)`), and the one `step()`
updates on their sum. Where they do not all run in turn (one under an `if`), or the script also
accumulates over micro-steps, the file is left unchanged (MIG128 names the lines).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import Binding, CallSite, child_nodes, descendants, read_names, spell
from migrate.analysis.models import aliases, top_statement
from migrate.analysis.ordering import ModelOrdering
from migrate.analysis.sites import Accumulation
from migrate.analysis.syntax import calls_in
from migrate.rewrite import small_statement_holding
from migrate.steps.base import Context, comment_lines, expression, statement, statements
from migrate.steps.deepspeed_engine import EngineConfig, autocast_precision
from migrate.steps.engine_crossings import backward_engines, cross_engine_calls
from migrate.target_options import DeepSpeedOptions

# calls a boundary test may make twice (once more before the backward) without changing anything
PURE_CALLS = frozenset({"len", "int", "float", "min", "max", "abs", "round"})


def engine_calls(ctx: Context) -> None:
    if EngineConfig not in ctx.records:
        return
    config = ctx.recorded(EngineConfig)
    engines = config.engines or (config.engine,)
    accumulates = config.accumulates
    side = config.engine.side
    names = {id(each): aliases(ctx.index, each.model) for each in engines}
    by_optimizer = {each.optimizer: each for each in engines}
    owners = backward_engines(ctx, engines)
    if owners is None:
        ctx.refused = True
        return
    if len(engines) > 1 and not cross_engine_calls(ctx, engines, owners):
        ctx.refused = True
        return
    if accumulates and not _one_backward_per_micro_step(ctx, owners):
        ctx.refused = True
        return
    backward_tops: dict[tuple[int, int], cst.BaseStatement] = {}  # (scope node, engine) -> its backward there
    handled: set[cst.BaseStatement] = set()  # statements that no longer read what they read
    followed: set[int] = set()  # accumulations whose boundary is set (two backwards may share one)
    for call in ctx.sites.backward_calls:
        engine = owners[id(call.node)]
        spelled = _engine_in(names[id(engine)], call)
        if spelled is None:
            ctx.report("MIG117", "backward runs where the model is not reachable: call engine.backward(loss) there by hand", call.node)
            continue
        new = _engine_backward(ctx, call, spelled, accumulates)
        if new is None:
            ctx.refused = True
            return
        ctx.plan.replace_with(call.node, new)
        backward_tops[(id(call.place.scope.node), id(engine))] = call.place.stmt
        handled.add(call.place.stmt)
        if accumulates:
            _follow_window(ctx, spelled, call, config, followed)
    for call in side.step_calls:
        engine = by_optimizer.get(_stepped_optimizer(call) or "", config.engine)
        if not _backwards_sharing_step(ctx, call, engine, owners, names[id(engine)], accumulates):
            ctx.refused = True
            return
        if _step(ctx, call, names[id(engine)], backward_tops, id(engine)):
            handled.add(call.place.stmt)
    # the script's own class steps DeepSpeed's optimizer itself (engine.step() never runs, and
    # nothing else clears the gradients): its zero_grad() stays
    clears = [] if config.engine.stepped_by else side.zero_grad_calls
    for call in clears + side.scaler_calls + side.clip_calls:
        _remove_call(ctx, call)
        if call.place.stmt in ctx.plan.removed:
            handled.add(call.place.stmt)
    for binding in side.scaler_bindings:
        _remove_scaler(ctx, binding, handled)
    for block in side.autocast_blocks:
        if autocast_precision(block) != config.precision:
            ctx.plan.splice(block)  # the config's torch_autocast decides alone
    _report_fp16_under_zero(ctx, config)
    _remove_emptied_ifs(ctx)


def _engine_backward(ctx: Context, call: CallSite, engine: str, accumulates: bool) -> cst.BaseExpression | None:
    """`engine.backward(loss)` for `loss.backward()`, keeping `retain_graph=`; a gradient given
    to backward (`loss.backward(minus_one)`) weights the loss instead: `(loss * minus_one).sum()`
    has the same gradients, and the engine's backward takes a scalar loss only."""
    loss = ctx.code(_loss_of(call))
    kept = ""
    for arg in call.node.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if arg.star:
            ctx.report("MIG117", f"`{ctx.code(call.node)}` passes arguments DeepSpeed's engine.backward(loss) cannot "
                       "take; the file is left unchanged", call.node)
            return None
        if keyword in (None, "gradient") and arg is call.node.args[0]:
            if ctx.code(arg.value) != "None":
                loss = f"({loss} * {ctx.code(arg.value)}).sum()"
        elif keyword == "retain_graph":
            kept += f", retain_graph={ctx.code(arg.value)}"
        elif keyword is None and len(call.node.args) > 1 and arg is call.node.args[1]:
            kept += f", retain_graph={ctx.code(arg.value)}"
        elif keyword not in ("create_graph", "inputs") or ctx.code(arg.value) not in ("False", "None"):
            ctx.report("MIG117", f"`{ctx.code(call.node)}` passes `{ctx.code(arg).rstrip(', ')}`, which DeepSpeed's "
                       "engine.backward(loss) does not take; the file is left unchanged", call.node)
            return None
    extra = ", scale_wrt_gas=False" if accumulates else ""
    return expression(f"{engine}.backward({loss}{kept}{extra})")


def _backwards_sharing_step(ctx: Context, step: CallSite, engine: ModelOrdering, owners: dict[int, ModelOrdering],
                            names: set[tuple[str, str]], accumulates: bool) -> bool:
    """Several backwards of one engine before its one step (a GAN's discriminator:
    `errD_real.backward(); errD_fake.backward(); optD.step()`): each engine.backward() is an
    accumulation boundary by default, and at ZeRO 1-2 the gradients of a boundary backward
    replace those reduced before it in the same step, so only the last loss would train. The
    earlier ones are marked inside the window (`set_gradient_accumulation_boundary(False)`), the
    last one ends it (`(True)`), as DeepSpeed's own docstring of that call shows. False (with
    MIG128 naming the lines) where they run conditionally or under the script's own accumulation."""
    group = _backwards_before(ctx, step, engine, owners)
    if len(group) < 2:
        return True
    lines = ", ".join(str(ctx.position(call.node)[0]) for call in group)
    problem = ("the script accumulates gradients over micro-steps too" if accumulates
               else None if all(_runs_in_turn(ctx, call, step) for call in group)
               else "not every one of them runs on every step (one sits under an `if`, a loop or a `try`)")
    if problem is not None:
        ctx.report("MIG128", f"{len(group)} backwards (lines {lines}) feed the one `{ctx.code(step.node)}`, and {problem}: "
                   "DeepSpeed keeps only the last backward's gradients at ZeRO 1-2 unless the earlier ones are marked "
                   "inside its accumulation window, which this tool does only for backwards that all run in turn; "
                   "the file is left unchanged: sum the losses into one backward, then convert again", step.node)
        return False
    spelled = _engine_in(names, step) or engine.model.spelling
    why = (f"{len(group)} backwards feed one step: all but the last stay inside DeepSpeed's accumulation window, "
           "or ZeRO 1-2 would keep only the last one's gradients")
    for call in group[:-1]:
        ctx.plan.insert_before(call.place.stmt, statements(
            comment_lines(why) * (call is group[0]) + f"{spelled}.set_gradient_accumulation_boundary(False)\n"))
    ctx.plan.insert_before(group[-1].place.stmt, statements(f"{spelled}.set_gradient_accumulation_boundary(True)\n"))
    return True


def _one_backward_per_micro_step(ctx: Context, owners: dict[int, ModelOrdering]) -> bool:
    """With the script's own accumulation, each backward is told the window's test: two backwards
    of one engine in one micro-step would both end the window on its last micro-step, and ZeRO 1-2
    would keep only the second one's gradients. False (with MIG128) where two are in one loop body."""
    seen: dict[tuple[int, int], CallSite] = {}
    for call in ctx.sites.backward_calls:
        block = ctx.index.block_of[_top_in_loop(ctx, call.place.stmt)][0]
        first = seen.setdefault((id(block), id(owners[id(call.node)])), call)
        if first is not call:
            lines = f"{ctx.position(first.node)[0]} and {ctx.position(call.node)[0]}"
            ctx.report("MIG128", f"two backwards (lines {lines}) run in one accumulation micro-step of one engine: "
                       "DeepSpeed would end the window at both on its last micro-step and keep only the second one's "
                       "gradients at ZeRO 1-2; the file is left unchanged: sum the losses into one backward, then "
                       "convert again", call.node)
            return False
    return True


def _backwards_before(ctx: Context, step: CallSite, engine: ModelOrdering,
                      owners: dict[int, ModelOrdering]) -> list[CallSite]:
    """The engine's backward calls in the step's block after its previous step there, before this one."""
    block, position = ctx.index.block_of[step.place.stmt]
    same = _stepped_optimizer(step)
    earlier = [at for other in engine.side.step_calls
               if other is not step and _stepped_optimizer(other) == same
               and (at := _position_in(ctx, other, block)) is not None and at < position]
    start = max(earlier, default=-1)
    return [call for call in ctx.sites.backward_calls
            if owners.get(id(call.node)) is engine
            and (at := _position_in(ctx, call, block)) is not None and start < at < position]


def _position_in(ctx: Context, call: CallSite, block: cst.Module | cst.IndentedBlock) -> int | None:
    """The position in `block` of the statement there that holds `call`, if one does."""
    top = top_statement(ctx.index, call.place.stmt, block)
    return block.body.index(top) if top is not None else None


def _runs_in_turn(ctx: Context, call: CallSite, step: CallSite) -> bool:
    """Whether the backward runs each time the step's block does: a line of its own, inside
    nothing but `with` blocks below that block."""
    block = ctx.index.block_of[step.place.stmt][0]
    if not isinstance(call.place.stmt, cst.SimpleStatementLine):
        return False
    for stmt in ctx.index.enclosing_statements(call.place.stmt):
        if stmt is not call.place.stmt and not isinstance(stmt, cst.With):
            return False
        if ctx.index.block_of.get(stmt, (None,))[0] is block:
            return True
    return False


def _stepped_optimizer(call: CallSite) -> str | None:
    """`optimizer` of `optimizer.step()` or `scaler.step(optimizer)`."""
    func = call.node.func
    if call.node.args:
        return spell(call.node.args[0].value)
    return spell(func.value) if isinstance(func, cst.Attribute) else None


def _engine_in(names: set[tuple[str, str]], call: CallSite) -> str | None:
    """The engine's spelling in the scope of a call."""
    for spelled, scope in sorted(names):
        if scope == call.place.scope.name:
            return spelled
    return None


def _loss_of(call: CallSite) -> cst.BaseExpression:
    """`loss.backward()` -> loss; `scaler.scale(loss).backward()` -> loss."""
    func = call.node.func
    assert isinstance(func, cst.Attribute)
    value = func.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "scale" and value.args:
        return value.args[0].value
    return value


def _step(ctx: Context, call: CallSite, names: set[tuple[str, str]], backward_tops: dict[tuple[int, int], cst.BaseStatement],
          engine: int) -> bool:
    """`optimizer.step()` -> `engine.step()`; False when it is left for the user (MIG117)."""
    spelled = _engine_in(names, call)
    backward = backward_tops.get((id(call.place.scope.node), engine))
    if spelled is None or backward is None:
        ctx.report("MIG117", "the optimizer steps where the model is not reachable: call engine.step() there by hand", call.node)
        return False
    stmt = call.place.stmt
    backward_block = ctx.index.block_of.get(_top_in_loop(ctx, backward))
    if backward_block is not None and ctx.index.block_of.get(stmt, (None,))[0] is backward_block[0]:
        ctx.plan.replace_with(call.node, expression(f"{spelled}.step()"))
        return True
    if not _under_accumulation_test(ctx, stmt):
        line = ctx.position(backward)[0]
        ctx.report("MIG128", f"`{ctx.code(call.node)}` runs in another block than the backward (line {line}) and not "
                   "under an accumulation test this tool follows (`if (step + 1) % n == 0:`): it may sit in one "
                   "branch of several, or after an inner loop of backwards, and DeepSpeed's engine steps after every "
                   "backward; the file is left unchanged: convert it by hand", call.node)
        ctx.refused = True
        return False
    # inside `if (step + 1) % n == 0:` — the engine steps after every backward, on the boundary set before it
    ctx.plan.remove_part(stmt, call.node)
    ctx.plan.insert_after(_top_in_loop(ctx, backward), [statement(f"{spelled}.step()\n")])
    return True


def _under_accumulation_test(ctx: Context, stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` sits under the `if` of an accumulation window (analysis.accumulation)."""
    step_ifs = {id(accumulation.step_if) for accumulation in ctx.sites.accumulations}
    return any(id(around) in step_ifs for around in ctx.index.enclosing_statements(stmt))


def _report_fp16_under_zero(ctx: Context, config: EngineConfig) -> None:
    """MIG126 for float16 under ZeRO 1-3, whose GradScaler DeepSpeed 0.19.8 mishandles."""
    zero = DeepSpeedOptions.of(ctx.options).zero
    if config.precision != "fp16" or zero == 0:
        return
    side = config.engine.side
    node = side.scaler_bindings[0].node if side.scaler_bindings else config.engine.anchor
    ctx.report("MIG126", "float16 runs under DeepSpeed's torch_autocast with its own GradScaler, which DeepSpeed 0.19.8 "
               f"mishandles at ZeRO stage {zero}: a step that overflows does not lower the scale, so every "
               "later step is skipped too (the loss stops moving), and clipping sees the scaled gradients; "
               "train with --zero 0, or --bf16 where the GPUs have bfloat16", node)


def _follow_window(ctx: Context, engine: str, backward: CallSite, config: EngineConfig, followed: set[int]) -> None:
    """`engine.set_gradient_accumulation_boundary(<the script's test>)` before the backward of an
    accumulating micro-step, so that the engine steps where the script's `if` does (MIG126 where it
    cannot, or where the script drops gradients DeepSpeed keeps)."""
    accumulation = _accumulation_of(ctx, backward, config)
    if accumulation is None or id(accumulation) in followed:
        return
    followed.add(id(accumulation))
    for call in _dropping_zero_grads(ctx, accumulation, config):
        ctx.report("MIG126", f"`{ctx.code(call.node)}` drops the gradients of micro-steps whose accumulation window "
                   "has not ended (an epoch's last ones, when its length is not a multiple of the accumulation "
                   "steps); DeepSpeed has no call that drops them and adds them to the next update instead: for "
                   "the same updates, make epochs a multiple of it or step on an epoch's last micro-step too "
                   "(`... or step + 1 == len(loader)`)",
                   call.node)
    test = ctx.code(accumulation.condition)
    problem = _unmovable(ctx, accumulation)
    if problem is not None:
        ctx.report("MIG126", f"`{test}` cannot be read before the backward ({problem}): DeepSpeed steps every "
                   "gradient_accumulation_steps micro-steps by its own count, which does not restart with each "
                   "epoch; updates differ from the script's when an epoch is not a multiple of them",
                   accumulation.condition)
        return
    ctx.plan.insert_before(accumulation.last, statements(
        "# the engine steps the optimizer when the script's own test holds (its own count runs on across epochs)\n"
        f"{engine}.set_gradient_accumulation_boundary({test})\n"
    ))


def _accumulation_of(ctx: Context, backward: CallSite, config: EngineConfig) -> Accumulation | None:
    """The engine's model's accumulation whose micro-step holds this backward."""
    chain = ctx.index.enclosing_statements(backward.place.stmt)
    for accumulation in ctx.sites.accumulations:
        if accumulation.model == config.engine.model.spelling and accumulation.last in chain:
            return accumulation
    return None


def _step_if(ctx: Context, accumulation: Accumulation) -> tuple[list[cst.BaseStatement], cst.If]:
    """The statements from the one holding the backward up to the accumulation's `if`, and the `if`."""
    block, position = ctx.index.block_of[accumulation.last]
    between: list[cst.BaseStatement] = []
    for stmt in block.body[position:]:
        if stmt is accumulation.step_if:
            return between, stmt
        between.append(stmt)
    raise AssertionError("analysis.accumulation found the `if` after the backward in the same block")


def _unmovable(ctx: Context, accumulation: Accumulation) -> str | None:
    """Why the `if`'s test would read something else before the backward, if it would: it calls
    something that may change state, or the statements in between rebind what it reads."""
    test = accumulation.condition
    for call in calls_in(test):
        if spell(call.func) not in PURE_CALLS:
            return f"it calls `{ctx.code(call.func)}`"
    reads = {spelled for node in descendants(test) if isinstance(node, cst.BaseExpression) and (spelled := spell(node)) is not None}
    between, _ = _step_if(ctx, accumulation)
    for stmt in between:
        for bound in _bound_spellings(stmt):
            if any(read == bound or read.startswith(f"{bound}.") or bound.startswith(f"{read}.") for read in reads):
                return f"`{bound}` changes between the backward and the test"
    return None


def _bound_spellings(stmt: cst.CSTNode) -> set[str]:
    """`a`, `self.n`... that a statement (or anything in it) assigns, augments or loops over."""
    targets: list[cst.BaseExpression] = []
    for node in descendants(stmt):
        if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
            targets.append(node.target)
        elif isinstance(node, cst.AsName) and isinstance(node.name, cst.BaseExpression):
            targets.append(node.name)
    found: set[str] = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(element.value for element in target.elements)
        elif isinstance(target, cst.StarredElement):
            targets.append(target.value)
        elif (spelled := spell(target)) is not None:
            found.add(spelled)
    return found


def _dropping_zero_grads(ctx: Context, accumulation: Accumulation, config: EngineConfig) -> list[CallSite]:
    """`zero_grad()` calls that clear gradients between two micro-steps outside the accumulation's
    `if` (at the start of each epoch): the original drops an unfinished window there."""
    backward_chain = ctx.index.enclosing_statements(accumulation.last)
    loops = [s for s in backward_chain if isinstance(s, (cst.For, cst.While))]
    _, step_if = _step_if(ctx, accumulation)
    found = []
    for call in config.engine.side.zero_grad_calls:
        chain = ctx.index.enclosing_statements(call.place.stmt)
        if step_if not in chain and any(loop in chain for loop in loops):
            found.append(call)
    return found


def _remove_scaler(ctx: Context, binding: Binding, handled: set[cst.BaseStatement]) -> None:
    """`scaler = GradScaler()` goes, unless the script still reads the scaler elsewhere
    (`scaler.get_scale()` in a print, `scaler.state_dict()` in a checkpoint): then it stays, so
    that those reads find it."""
    read = _read_elsewhere(ctx, binding.target, handled | {binding.place.stmt})
    if read is None:
        ctx.plan.remove_part(binding.place.stmt, binding.node)
        return
    ctx.report("MIG004", f"`{binding.target} = ...` (the GradScaler) is kept because the script still reads it here; "
               "DeepSpeed scales the loss itself (its own GradScaler), so this scaler's values no longer describe training", read)


def _read_elsewhere(ctx: Context, name: str, handled: set[cst.BaseStatement]) -> cst.BaseStatement | None:
    """The first statement the conversion leaves as it is that reads `name`."""
    for stmt in ctx.index.scope_of:
        if stmt not in handled and name in _own_reads(stmt):
            return stmt
    return None


def _own_reads(stmt: cst.BaseStatement) -> set[str]:
    """The names a statement reads itself: a line, or a compound statement's header and one-line
    bodies (`if i % 25 == 0: print(scaler.get_scale())`); its indented blocks hold statements of their own."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)
        elif not isinstance(node, cst.IndentedBlock):
            stack.extend(child_nodes(node))
    return found


def _top_in_loop(ctx: Context, stmt: cst.BaseStatement) -> cst.BaseStatement:
    """The statement holding `stmt` directly in its loop body (a backward inside `with` blocks)."""
    chain = ctx.index.enclosing_statements(stmt)
    for inner, outer in zip(chain, chain[1:]):
        if isinstance(outer, (cst.For, cst.While)):
            return inner
    return stmt


def _remove_call(ctx: Context, call: CallSite) -> None:
    """Remove the statement the call stands as (`optimizer.zero_grad()`; `norm = clip_grad_norm_(...)`
    unless `norm` is read elsewhere), and nothing else on its line."""
    holder, small = small_statement_holding(call.place.stmt, call.node)
    stmt = call.place.stmt
    if (isinstance(stmt, cst.If) and stmt.body is holder and stmt.orelse is None and len(holder.body) == 1
            and isinstance(small, cst.Expr) and small.value is call.node and not calls_in(stmt.test)):
        ctx.plan.remove(stmt)  # `if args.clip: clip_grad_norm_(...)`: the whole line goes, not just its call
        return
    if isinstance(small, cst.Expr) and small.value is call.node:
        ctx.plan.remove_part(call.place.stmt, call.node)
    elif isinstance(small, cst.Assign) and small.value is call.node:
        names = {n for target in small.targets for n in read_names(target.target)}
        if not any(_read_elsewhere(ctx, name, {call.place.stmt}) for name in names):
            ctx.plan.remove_part(call.place.stmt, call.node)


def _remove_emptied_ifs(ctx: Context) -> None:
    """An `if` whose whole body was removed goes too (the accumulation boundary test), and then an
    `if` around it left empty in turn. Only the `if`s around removed statements can be emptied, so
    those are checked, outwards, instead of every statement again after each removal."""
    parent_of = ctx.index.parent_of
    pending = [parent_of[stmt] for stmt in ctx.plan.removed if stmt in parent_of]
    while pending:
        parent = pending.pop()
        if (
            isinstance(parent, cst.If)
            and parent not in ctx.plan.removed
            and parent.orelse is None
            and isinstance(parent.body, cst.IndentedBlock)
            and all(s in ctx.plan.removed for s in parent.body.body)
        ):
            ctx.plan.remove(parent)
            if parent in parent_of:
                pending.append(parent_of[parent])


