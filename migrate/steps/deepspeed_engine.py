"""`deepspeed.initialize` turns the model and the user's own optimizer into one engine, right
after both exist (and after any weight loading), with the settings of ds_config.json.

The script reads the JSON and then overwrites the keys it has its own values for (micro batch,
accumulation steps, clipping, fp16 on/off), so a `--batch-size 8` on the command line is what
DeepSpeed uses too. The JSON gets the script's defaults as concrete numbers.

After the engine exists, the user's module is reached through `.module`, and a plain
`state_dict()` is gathered on every rank first (ZeRO-3 shards the weights across ranks).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import libcst as cst

from migrate.analysis.index import read_names
from migrate.analysis.models import top_statement
from migrate.analysis.optimizers import OptimizerSide
from migrate.analysis.ordering import ModelOrdering, NoModelOrdering, Unordered, model_ordering
from migrate.analysis.state_dicts import model_state_dicts
from migrate.analysis.training import argument, contains
from migrate.analysis.values import literal_value
from migrate.steps.base import Context, expression, statements
from migrate.steps.wrap_model import remove_data_parallel, report_unwrapped_model, unwrap_later_uses
from migrate.targets.deepspeed import CONFIG_NAME


def deepspeed_engine(ctx: Context) -> None:
    engine = _engine_site(ctx)
    if engine is None:
        ctx.refused = True
        return
    values = _config_values(ctx, engine)
    if not _usable_config(ctx, values, engine):
        ctx.refused = True
        return
    ctx.record(values)
    config_path = _config_path_code(ctx)
    deepspeed, json = ctx.module_name("deepspeed"), ctx.module_name("json")
    overrides = "".join(f'ds_config[{key}] = {code}\n' for key, code in values.overrides)
    model, optimizer = engine.model.spelling, engine.optimizer
    code = (
        "\n# DeepSpeed reads its settings from ds_config.json; the values this script computes itself\n"
        "# overwrite the file's, so the two never disagree\n"
        f"with open({config_path}) as config_file:\n"
        f"    ds_config = {json}.load(config_file)\n"
        f"{overrides}"
        f"{model}, {optimizer}, _, _ = {deepspeed}.initialize(model={model}, optimizer={optimizer}, config=ds_config)\n"
    )
    ctx.plan.insert_after(engine.anchor, statements(code))
    remove_data_parallel(ctx, engine.model)
    assert ctx.wrapper is not None  # the engine: what it answers itself is the target's
    unwrap_later_uses(ctx, engine.model, safe=ctx.wrapper.safe)
    _gather_state_dicts(ctx, engine)
    _warn_optimizer_state(ctx, engine)


def _engine_site(ctx: Context) -> ModelOrdering | None:
    """Where the engine is created; None (with the finding that says why) when nowhere."""
    ordering = model_ordering(ctx.sites)
    if ordering.compiled_first is not None:
        ctx.report("MIG115", "torch.compile runs before deepspeed.initialize; call engine.compile() instead", ordering.compiled_first)
    if isinstance(ordering, NoModelOrdering):
        _report_no_engine(ctx, ordering)
        return None
    return ordering


def _report_no_engine(ctx: Context, ordering: NoModelOrdering) -> None:
    """The finding for each reason the engine has no place (MIG104, MIG113, MIG114)."""
    first = ctx.sites.backward_calls[0].node if ctx.sites.backward_calls else None
    models = ordering.models
    if ordering.reason is Unordered.NO_MODEL:
        report_unwrapped_model(ctx)
    elif ordering.reason is Unordered.SEVERAL_MODELS:
        names = ", ".join(f"`{m.spelling}`" for m in models)
        ctx.report("MIG113", f"{len(models)} models are trained ({names}); one DeepSpeed engine per model and "
                   "optimizer is not converted automatically; the file is left unchanged", first)
    else:
        ctx.report("MIG114", f"the optimizer stepped in training is not built beside `{models[0].spelling}`; "
                   "pass it to deepspeed.initialize by hand; the file is left unchanged", first)


def _config_path_code(ctx: Context) -> str:
    os_name = ctx.module_name("os")
    name = ctx.options.config_out or CONFIG_NAME
    if os.path.isabs(name):
        return python_string(name)
    return f"{os_name}.path.join({os_name}.path.dirname({os_name}.path.abspath(__file__)), {python_string(name)})"


def python_string(text: str) -> str:
    """A double-quoted Python literal of `text`. Every JSON escape means the same in Python, and
    with ensure_ascii=False a character outside the BMP stays itself (ASCII-only JSON spells it as
    two surrogate escapes, which Python reads as two other characters: another file name)."""
    return json.dumps(text, ensure_ascii=False)


# -- the numbers ---------------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)
class EngineConfig:
    """What the DeepSpeed step decided: the engine's place, the concrete numbers ds_config.json
    gets, and the script's own expressions that overwrite them (read by engine_calls and by the
    config maker in migrate.targets.deepspeed)."""

    engine: ModelOrdering
    micro_batch: object = 1
    accumulation: object = 1
    clipping: object = 0.0
    fp16: bool = False
    bf16: bool = False
    accumulates: bool = False
    overrides: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (JSON key code, script's code)


def _config_values(ctx: Context, engine: ModelOrdering) -> EngineConfig:
    """JSON values (concrete numbers) and the script's own expressions that override them."""
    values = EngineConfig(engine)
    overrides = values.overrides

    def choose(key: str, json_key: str, candidates: list[cst.BaseExpression | str | None], default: object) -> None:
        """The JSON gets the first candidate's value when it can be read statically, else
        `default`; the script overrides it with the first candidate it can spell at the
        engine's creation (candidates are the script's expression, then fallbacks as code)."""
        first = candidates[0] if candidates else None
        literal = literal_value(ctx.index, first) if isinstance(first, cst.BaseExpression) else None
        if literal is None and isinstance(first, cst.Integer):
            literal = f"a {len(first.value)}-digit number"  # too long to read: refused by _usable_config
        setattr(values, key, literal if literal is not None else default)
        if isinstance(first, (cst.Integer, cst.Float)):
            return  # a number written in the call: the JSON says the same
        for candidate in candidates:
            if isinstance(candidate, str):
                overrides.append((json_key, candidate))
                return
            if candidate is not None and _visible(ctx, candidate, engine):
                overrides.append((json_key, ctx.code(candidate)))
                return
        if isinstance(first, cst.BaseExpression):
            ctx.report("MIG116", f"`{ctx.code(first)}` is not known where the engine is created: ds_config.json "
                       f"fixes {json_key} at {getattr(values, key)}; keep the two equal", engine.anchor)

    loader = ctx.sites.loaders[0] if ctx.sites.loaders else None
    batch = argument(loader.call.node, "batch_size", 1) if loader else None
    loader_names = [f"{n}.batch_size" for n in _visible_loaders(ctx, engine)]
    choose("micro_batch", '"train_micro_batch_size_per_gpu"', [batch.value if batch else None, *loader_names], 1)

    factor = _accumulation_factor(ctx, engine)
    choose("accumulation", '"gradient_accumulation_steps"', [factor], 1)
    values.accumulates = factor is not None

    clip = engine.side.clip_calls[0].node if engine.side.clip_calls else None
    max_norm = argument(clip, "max_norm", 1) if clip is not None else None
    choose("clipping", '"gradient_clipping"', [max_norm.value if max_norm else None], 1.0 if max_norm else 0.0)
    if isinstance(values.clipping, int) and not isinstance(values.clipping, bool):
        values.clipping = float(values.clipping)

    precision, enabled = _precision(ctx, engine.side)
    values.fp16 = precision == "fp16"
    values.bf16 = precision == "bf16"
    if precision in ("fp16", "bf16") and enabled is not None and _visible(ctx, enabled, engine):
        overrides.append((f'"{precision}"]["enabled"', ctx.code(enabled)))
    return values


CONFIG_SOURCES = {
    "micro_batch": ("train_micro_batch_size_per_gpu", "the training DataLoader's batch_size"),
    "accumulation": ("gradient_accumulation_steps", "the accumulation factor in the `if ... % n` test"),
}


def _usable_config(ctx: Context, values: EngineConfig, engine: ModelOrdering) -> bool:
    """A number the script trains with that no DeepSpeed config can hold (a batch of -1, an
    infinite or negative clipping norm) is refused, never written into ds_config.json."""
    problems = []
    for key, (json_key, source) in CONFIG_SOURCES.items():
        value = getattr(values, key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**9:
            shown = value if isinstance(value, str) else repr(value)
            problems.append(f"{json_key} would be {shown} ({source}), and DeepSpeed needs a whole number from 1 up")
    clipping = values.clipping
    if isinstance(clipping, bool) or not isinstance(clipping, (int, float)) or not math.isfinite(clipping) or clipping < 0:
        problems.append(f"gradient_clipping would be {clipping!r} (the max_norm given to clip_grad_norm_), and "
                        "DeepSpeed needs a finite number, 0 or more (0 turns clipping off)")
    if problems:
        ctx.report("MIG125", "; ".join(problems) + "; left unchanged: fix the value, then convert again", engine.anchor)
    return not problems


def _accumulation_factor(ctx: Context, engine: ModelOrdering) -> cst.BaseExpression | None:
    """`n` of the engine's model's `if ... % n ...: optimizer.step()` (analysis.accumulation)."""
    for accumulation in ctx.sites.accumulations:
        if accumulation.model == engine.model.spelling:
            return accumulation.factor
    return None


def _precision(ctx: Context, side: OptimizerSide) -> tuple[str, cst.BaseExpression | None]:
    """The precision to ask DeepSpeed for, and the script's own on/off switch for it."""
    chosen = ctx.options.precision
    enabled = None
    for binding in side.scaler_bindings:
        if isinstance(binding.value, cst.Call):
            switch = argument(binding.value, "enabled", 99)
            enabled = switch.value if switch is not None else None
    if chosen != "auto":
        return chosen, enabled
    if side.scaler_bindings:
        return "fp16", enabled
    for block in side.autocast_blocks:
        if contains(block.items[0].item, lambda n: isinstance(n, cst.Attribute) and n.attr.value == "bfloat16"):
            return "bf16", None
    return "fp32", None


def _visible_loaders(ctx: Context, engine: ModelOrdering) -> list[str]:
    """Training loader spellings that exist where the engine is created."""
    names = set(ctx.sites.training_loader_names) | {site.spelling for site in ctx.sites.loaders if site.spelling}
    return sorted(n for n in names if _visible(ctx, expression(n), engine))


def _visible(ctx: Context, expression: cst.BaseExpression, engine: ModelOrdering) -> bool:
    """Whether every name the expression reads is defined where the engine is created."""
    scope = engine.model.scope
    block, position = ctx.index.block_of[engine.anchor]
    for name in read_names(expression):
        if name in scope.params or name in ctx.index.imports or name in ctx.index.functions:
            continue
        bound_before = any(
            b.target == name
            and b.place.scope.node is scope.node  # not a local of a function defined above
            and (top := top_statement(ctx.index, b.place.stmt, block)) is not None
            and block.body.index(top) <= position
            for b in ctx.index.bindings
        )
        module_level = any(b.target == name and b.place.scope.is_module for b in ctx.index.bindings) and not scope.is_module
        if not (bound_before or module_level):
            return False
    return True


# -- state dicts ---------------------------------------------------------------------------------

def _gather_state_dicts(ctx: Context, engine: ModelOrdering) -> None:
    """`torch.save(model.state_dict(), p)` -> gather on every rank, then save the full copy."""
    deepspeed = ctx.module_name("deepspeed")
    for read in model_state_dicts(ctx.index, engine.model):
        variable = f"{read.owner.split('.')[-1]}_state"
        gather = statements(
            f"with {deepspeed}.zero.GatheredParameters(list({read.owner}.module.parameters())):"
            "  # ZeRO-3 shards the weights: every rank gathers\n"
            f"    {variable} = {{name: tensor.detach().cpu().clone() for name, tensor in {read.owner}.module.state_dict().items()}}\n"
        )
        ctx.plan.insert_before(read.stmt, gather[:-1])
        ctx.plan.insert_above(read.stmt, gather[-1])
        ctx.plan.replace_with(read.call, cst.Name(variable))


def _warn_optimizer_state(ctx: Context, engine: ModelOrdering) -> None:
    """DeepSpeed's optimizer state is sharded per rank from ZeRO-1 on: a saved
    `optimizer.state_dict()` resumes only the same setup; its own checkpoints are the way."""
    if ctx.options.zero == 0:
        return  # stage 0 keeps the torch optimizer itself
    for use in ctx.index.attributes:
        if use.owner == engine.optimizer and use.node.attr.value in ("state_dict", "load_state_dict") and use.called:
            ctx.report("MIG118", f"`{engine.optimizer}.{use.node.attr.value}()` is per-rank optimizer state under ZeRO; "
                       "to resume, use engine.save_checkpoint(dir) / engine.load_checkpoint(dir) on every rank", use.node)
