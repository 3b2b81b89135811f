"""An AMP GradScaler becomes FSDP's ShardedGradScaler. Under FSDP each rank holds only a shard
of every gradient, so a plain GradScaler finds an overflow on some ranks and not on others: those
skip the step while the rest take it, and the shards of one weight drift apart. The sharded
scaler all-reduces what it finds. `--mixed-precision fp16` without any scaler is reported.
"""

from __future__ import annotations

from migrate.analysis.optimizers import SCALERS
from migrate.steps.base import Context, expression
from migrate.target_options import FsdpOptions

SHARDED = "torch.distributed.fsdp.sharded_grad_scaler"
# positional parameters of each scaler, so positional arguments can be passed by name to the other
POSITIONAL = {
    "torch.cuda.amp.GradScaler": ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"),
    "torch.cuda.amp.grad_scaler.GradScaler": ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"),
    "torch.amp.GradScaler": ("device", "init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"),
}


def fsdp_scaler(ctx: Context) -> None:
    scalers = [call for call in ctx.index.calls if call.name in SCALERS]
    for call in scalers:
        sharded = ctx.imported(SHARDED, "ShardedGradScaler")
        names = POSITIONAL.get(call.name or "", ())
        args = [f"{names[i]}={ctx.code(arg.value)}" if arg.keyword is None and i < len(names) else ctx.code(arg)
                for i, arg in enumerate(call.node.args)]
        if call.name != "torch.amp.GradScaler":
            args.insert(0, 'device="cuda"')  # torch.cuda.amp's scaler is CUDA's; the sharded one is told
        ctx.plan.replace_with(call.node, expression(f"{sharded}({', '.join(a.rstrip(', ') for a in args)})"))
        ctx.report("MIG304", f"`{ctx.code(call.node.func)}` becomes ShardedGradScaler: each rank sees only its shard of "
                   "the gradients, and the sharded scaler agrees across ranks on whether a step overflowed", call.node)
    if FsdpOptions.of(ctx.options).mixed_precision == "fp16" and not scalers and ctx.sites.models:
        ctx.report("MIG304", "--mixed-precision fp16 computes in float16 and the script scales no loss: small gradients "
                   "underflow to zero; add a ShardedGradScaler around backward and the optimizer step, or choose "
                   "--mixed-precision bf16", ctx.sites.models[0].wrap_before or ctx.sites.models[0].wrap_after)
