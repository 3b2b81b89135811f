"""`--offload-optimizer cpu|nvme`: the optimizer steps on the CPU, where DeepSpeed wants one of its
own CPU optimizers (it refuses a torch one unless the config sets `zero_force_ds_cpu_optimizer` to
false, since torch's CPU step is several times slower).

torch's Adam and AdamW become `DeepSpeedCPUAdam` with the matching `adamw_mode`; AdamW's default
weight decay (0.01) is written out, since DeepSpeedCPUAdam's is 0. Any other optimizer, or one
given arguments DeepSpeedCPUAdam does not take (`foreach`, `fused`, `maximize`...), keeps its class:
the config then switches the guard off for it, and a note says so and why the step is slow.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.steps.base import Context, expression, with_keyword
from migrate.steps.deepspeed_engine import EngineConfig
from migrate.target_options import DeepSpeedOptions

ADAMW_MODE = {"torch.optim.Adam": False, "torch.optim.AdamW": True}
CPU_ADAM_KEYWORDS = frozenset({"params", "lr", "betas", "eps", "weight_decay", "amsgrad"})
ADAMW_DEFAULT_DECAY = "0.01"


@dataclass(frozen=True)
class TorchOptimizerOnCpu:
    """The optimizer keeps torch's class while its state is offloaded: the config must let it."""

    spelled: str


def cpu_optimizer(ctx: Context) -> None:
    if DeepSpeedOptions.of(ctx.options).offload_optimizer == "none" or EngineConfig not in ctx.records:
        return
    config = ctx.recorded(EngineConfig)
    for engine in config.engines or (config.engine,):
        _offloaded(ctx, engine.optimizer)


def _offloaded(ctx: Context, optimizer: str) -> None:
    """One engine's optimizer: DeepSpeedCPUAdam where it can be, else said (MIG004)."""
    call = _construction(ctx, optimizer)
    if call is None:
        return
    qualified = ctx.index.qualify(call.func) or ctx.code(call.func)
    unsupported = [a.keyword.value for a in call.args if a.keyword is not None and a.keyword.value not in CPU_ADAM_KEYWORDS]
    positional = [a for a in call.args if a.keyword is None]
    if qualified in ADAMW_MODE and not unsupported and not any(a.star for a in call.args) and len(positional) <= 2:
        _swap(ctx, call, qualified)
        return
    ctx.record(TorchOptimizerOnCpu(qualified))
    offload = DeepSpeedOptions.of(ctx.options).offload_optimizer
    why = (f" (it is given {', '.join(unsupported)}, which DeepSpeedCPUAdam does not take)"
           if qualified in ADAMW_MODE and unsupported else "")
    ctx.report("MIG004", f"`{optimizer}` ({qualified}) keeps torch's class while --offload-optimizer "
               f"{offload} steps it on the CPU{why}: ds_config.json sets "
               "zero_force_ds_cpu_optimizer to false so DeepSpeed accepts it, and each step is slower than with "
               "DeepSpeed's CPU optimizers (deepspeed.ops.adam.DeepSpeedCPUAdam for Adam/AdamW)", call)


def _construction(ctx: Context, optimizer: str) -> cst.Call | None:
    """The `torch.optim.X(...)` call the engine's optimizer is bound to, when there is one."""
    calls = {id(site.node) for site in ctx.sites.optimizers}
    for binding in ctx.index.bindings_of(optimizer):
        if isinstance(binding.value, cst.Call) and id(binding.value) in calls:
            return binding.value
    return None


def _swap(ctx: Context, call: cst.Call, qualified: str) -> None:
    cpu_adam = ctx.imported("deepspeed.ops.adam", "DeepSpeedCPUAdam")
    adamw = ADAMW_MODE[qualified]
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}

    def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        new = updated.with_changes(func=expression(cpu_adam))
        if adamw and "weight_decay" not in keywords:
            new = with_keyword(new, "weight_decay", expression(ADAMW_DEFAULT_DECAY))
        return with_keyword(new, "adamw_mode", expression(str(adamw)))

    ctx.plan.replace(call, rewrite)
    name = qualified.rsplit(".", 1)[-1]
    offload = DeepSpeedOptions.of(ctx.options).offload_optimizer
    default = f" and AdamW's default weight_decay={ADAMW_DEFAULT_DECAY} written out" if adamw and "weight_decay" not in keywords else ""
    ctx.report("MIG004", f"{name} becomes DeepSpeedCPUAdam (adamw_mode={adamw}{default}): --offload-optimizer "
               f"{offload} steps the optimizer on the CPU, where DeepSpeed accepts only its own "
               "CPU optimizers (torch's step there is several times slower)", call)
