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

from migrate.analysis.index import read_names, spell
from migrate.analysis.loaders import training_loader_names
from migrate.analysis.models import aliases, is_after, top_statement
from migrate.analysis.optimizers import OptimizerSide, accumulation_factor, optimizer_side
from migrate.analysis.sites import ModelSite
from migrate.analysis.training import argument, contains
from migrate.analysis.values import literal_value
from migrate.steps.base import Context, expression, statements
from migrate.steps.wrap_model import WRAPPER_SAFE, remove_data_parallel, report_unwrapped_model, unwrap_later_uses

ENGINE_SAFE = WRAPPER_SAFE | {"backward", "step", "save_checkpoint", "load_checkpoint", "state_dict"}
CONFIG_NAME = "ds_config.json"


@dataclasses.dataclass(eq=False)
class EngineSite:
    model: ModelSite  # with wrap_after moved to where the engine is created
    optimizer: str
    anchor: cst.BaseStatement
    side: OptimizerSide


def deepspeed_engine(ctx: Context) -> None:
    engine = _engine_site(ctx)
    if engine is None:
        ctx.refused = True
        return
    ctx.facts["engine"] = engine
    values = _config_values(ctx, engine)
    if not _usable_config(ctx, values, engine):
        ctx.refused = True
        return
    ctx.facts["ds_values"] = values
    config_path = _config_path_code(ctx)
    deepspeed, json = ctx.module_name("deepspeed"), ctx.module_name("json")
    overrides = "".join(f'ds_config[{key}] = {code}\n' for key, code in values["overrides"])
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
    unwrap_later_uses(ctx, engine.model, safe=ENGINE_SAFE)
    _gather_state_dicts(ctx, engine)
    _warn_optimizer_state(ctx, engine)


def _engine_site(ctx: Context) -> EngineSite | None:
    sites = ctx.sites
    first = sites.backward_calls[0].node if sites.backward_calls else None
    if len(sites.models) != 1:
        if sites.models:
            names = ", ".join(f"`{m.spelling}`" for m in sites.models)
            ctx.report("MIG113", f"{len(sites.models)} models are trained ({names}); one DeepSpeed engine per model and "
                       "optimizer is not converted automatically; the file is left unchanged", first)
        else:
            report_unwrapped_model(ctx)
        return None
    site = sites.models[0]
    side = optimizer_side(sites)
    anchor = site.wrap_after
    if anchor is None:
        assert site.wrap_before is not None
        ctx.report("MIG115", "torch.compile runs before deepspeed.initialize; call engine.compile() instead", site.wrap_before)
        anchor = site.wrap_before
    block, position = ctx.index.block_of[anchor]
    for optimizer in sorted(side.optimizers):
        stmt = _binding_statement(ctx, optimizer, site, block)
        if stmt is not None:
            later = max(position, block.body.index(stmt), _last_scheduler(ctx, optimizer, block))
            anchor = block.body[later]
            moved = dataclasses.replace(site, wrap_after=anchor, wrap_before=None)
            return EngineSite(model=moved, optimizer=optimizer, anchor=anchor, side=side)
    ctx.report("MIG114", f"the optimizer stepped in training is not built beside `{site.spelling}`; "
               "pass it to deepspeed.initialize by hand; the file is left unchanged", first)
    return None


def _last_scheduler(ctx: Context, optimizer: str, block: cst.Module | cst.IndentedBlock) -> int:
    """Index of the last statement in `block` that builds an LR scheduler on the optimizer: the
    scheduler must hold the torch optimizer (DeepSpeed's wrapper is not one), so the engine is
    created after it. The engine's optimizer shares its param_groups, so the LR still follows."""
    last = -1
    for call in ctx.index.calls:
        if not (call.name or "").startswith("torch.optim.lr_scheduler."):
            continue
        if any(spell(a.value) == optimizer for a in call.node.args):
            top = top_statement(ctx.index, call.place.stmt, block)
            if top is not None:
                last = max(last, block.body.index(top))
    return last


def _binding_statement(ctx: Context, spelling: str, site: ModelSite, block: cst.CSTNode) -> cst.BaseStatement | None:
    for binding in ctx.index.bindings:
        if binding.target != spelling:
            continue
        same_place = binding.place.scope is site.scope or (
            spelling.startswith("self.") and binding.place.scope.class_name == site.scope.class_name
        )
        top = top_statement(ctx.index, binding.place.stmt, block) if same_place else None
        if top is not None:
            return top
    return None


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

def _config_values(ctx: Context, engine: EngineSite) -> dict:  # type: ignore[type-arg]
    """JSON values (concrete numbers) and the script's own expressions that override them."""
    overrides: list[tuple[str, str]] = []
    values: dict[str, object] = {"overrides": overrides}

    def choose(key: str, json_key: str, candidates: list[cst.BaseExpression | str | None], default: object) -> None:
        """The JSON gets the first candidate's value when it can be read statically, else
        `default`; the script overrides it with the first candidate it can spell at the
        engine's creation (candidates are the script's expression, then fallbacks as code)."""
        first = candidates[0] if candidates else None
        literal = literal_value(ctx.index, first) if isinstance(first, cst.BaseExpression) else None
        if literal is None and isinstance(first, cst.Integer):
            literal = f"a {len(first.value)}-digit number"  # too long to read: refused by _usable_config
        values[key] = literal if literal is not None else default
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
                       f"fixes {json_key} at {values[key]}; keep the two equal", engine.anchor)

    loader = ctx.sites.loaders[0] if ctx.sites.loaders else None
    batch = argument(loader.call.node, "batch_size", 1) if loader else None
    loader_names = [f"{n}.batch_size" for n in _visible_loaders(ctx, engine)]
    choose("micro_batch", '"train_micro_batch_size_per_gpu"', [batch.value if batch else None, *loader_names], 1)

    factor = _accumulation(ctx, engine.side)
    choose("accumulation", '"gradient_accumulation_steps"', [factor], 1)
    values["accumulates"] = factor is not None

    clip = engine.side.clip_calls[0].node if engine.side.clip_calls else None
    max_norm = argument(clip, "max_norm", 1) if clip is not None else None
    choose("clipping", '"gradient_clipping"', [max_norm.value if max_norm else None], 1.0 if max_norm else 0.0)
    if isinstance(values["clipping"], int) and not isinstance(values["clipping"], bool):
        values["clipping"] = float(values["clipping"])

    precision, enabled = _precision(ctx, engine.side)
    values["fp16"] = precision == "fp16"
    values["bf16"] = precision == "bf16"
    if precision in ("fp16", "bf16") and enabled is not None and _visible(ctx, enabled, engine):
        overrides.append((f'"{precision}"]["enabled"', ctx.code(enabled)))
    return values


CONFIG_SOURCES = {
    "micro_batch": ("train_micro_batch_size_per_gpu", "the training DataLoader's batch_size"),
    "accumulation": ("gradient_accumulation_steps", "the accumulation factor in the `if ... % n` test"),
}


def _usable_config(ctx: Context, values: dict, engine: EngineSite) -> bool:  # type: ignore[type-arg]
    """A number the script trains with that no DeepSpeed config can hold (a batch of -1, an
    infinite or negative clipping norm) is refused, never written into ds_config.json."""
    problems = []
    for key, (json_key, source) in CONFIG_SOURCES.items():
        value = values[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**9:
            shown = value if isinstance(value, str) else repr(value)
            problems.append(f"{json_key} would be {shown} ({source}), and DeepSpeed needs a whole number from 1 up")
    clipping = values["clipping"]
    if isinstance(clipping, bool) or not isinstance(clipping, (int, float)) or not math.isfinite(clipping) or clipping < 0:
        problems.append(f"gradient_clipping would be {clipping!r} (the max_norm given to clip_grad_norm_), and "
                        "DeepSpeed needs a finite number, 0 or more (0 turns clipping off)")
    if problems:
        ctx.report("MIG125", "; ".join(problems) + "; left unchanged: fix the value, then convert again", engine.anchor)
    return not problems


def _accumulation(ctx: Context, side: OptimizerSide) -> cst.BaseExpression | None:
    for call in side.step_calls:
        for ancestor in ctx.index.enclosing_statements(call.place.stmt)[1:]:
            if isinstance(ancestor, cst.If) and contains(ancestor.test, lambda n: isinstance(n, cst.Modulo)):
                return accumulation_factor(ancestor.test)
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


def _visible_loaders(ctx: Context, engine: EngineSite) -> list[str]:
    """Training loader spellings that exist where the engine is created."""
    names = training_loader_names(ctx.index, ctx.sites.step_loops)
    names |= {site.spelling for site in ctx.sites.loaders if site.spelling}
    return sorted(n for n in names if _visible(ctx, expression(n), engine))


def _visible(ctx: Context, expression: cst.BaseExpression, engine: EngineSite) -> bool:
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

def _gather_state_dicts(ctx: Context, engine: EngineSite) -> None:
    """`torch.save(model.state_dict(), p)` -> gather on every rank, then save the full copy."""
    index = ctx.index
    names = aliases(index, engine.model)
    deepspeed = ctx.module_name("deepspeed")
    for use in index.attributes:
        if use.node.attr.value != "state_dict" or not use.called:
            continue
        owner = use.owner.removesuffix(".module")  # `model.module.state_dict()` of a former DataParallel
        if (owner, use.place.scope.name) not in names or not is_after(index, use.place.stmt, engine.model):
            continue
        call = index.derived("call_of_func", lambda: {c.node.func: c.node for c in reversed(index.calls)}).get(use.node)
        if call is None:
            continue
        variable = f"{owner.split('.')[-1]}_state"
        gather = statements(
            f"with {deepspeed}.zero.GatheredParameters(list({owner}.module.parameters())):"
            "  # ZeRO-3 shards the weights: every rank gathers\n"
            f"    {variable} = {{name: tensor.detach().cpu().clone() for name, tensor in {owner}.module.state_dict().items()}}\n"
        )
        ctx.plan.insert_before(use.place.stmt, gather[:-1])
        ctx.plan.insert_above(use.place.stmt, gather[-1])
        ctx.plan.replace_with(call, cst.Name(variable))



def _warn_optimizer_state(ctx: Context, engine: EngineSite) -> None:
    """DeepSpeed's optimizer state is sharded per rank from ZeRO-1 on: a saved
    `optimizer.state_dict()` resumes only the same setup; its own checkpoints are the way."""
    if ctx.options.zero == 0:
        return  # stage 0 keeps the torch optimizer itself
    for use in ctx.index.attributes:
        if use.owner == engine.optimizer and use.node.attr.value in ("state_dict", "load_state_dict") and use.called:
            ctx.report("MIG118", f"`{engine.optimizer}.{use.node.attr.value}()` is per-rank optimizer state under ZeRO; "
                       "to resume, use engine.save_checkpoint(dir) / engine.load_checkpoint(dir) on every rank", use.node)
