"""The module training updates must be the one wrapped: when it cannot be (it runs only inside
another object's method, or steps its own optimizer inside itself), the file is left unchanged
with MIG104, which names what was seen. Wrapping something else would let the replicas of the
trained module silently train apart.
"""

from __future__ import annotations

from migrate.analysis.models import ONLY_FORWARD
from migrate.steps.base import Context

# FSDP2 (fully_shard keeps the class) gathers the weights around forward() and registered methods;
# the conversion registers only methods called outside training
SHARDED_ONLY_FORWARD = ("FSDP2 gathers the weights only around forward() and around methods registered with "
                        "register_fsdp_forward_method, which this conversion does only for methods called outside "
                        "training, so that work would read shards")


def refuse_unless_method_bypass(ctx: Context) -> None:
    """Horovod: a model trained through a method other than forward() converts (its gradient
    hooks are on the parameters, not around forward()); every other reason still refuses."""
    if ctx.sites.unwrappable is not None and any(
            isinstance(part, str) and ONLY_FORWARD in part for part in ctx.sites.unwrappable[0]):
        return
    refuse_unwrappable(ctx)


def refuse_unwrappable(ctx: Context) -> None:
    if ctx.sites.unwrappable is None:
        return
    parts, node = ctx.sites.unwrappable
    text = "".join(part if isinstance(part, str) else str(ctx.position(part)[0]) for part in parts)
    if ctx.wrapper is not None and not ctx.wrapper.through_module:
        text = text.replace(ONLY_FORWARD, SHARDED_ONLY_FORWARD)
    ctx.report("MIG104", text, node)
    ctx.refused = True

