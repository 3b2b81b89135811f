"""The module training updates must be the one wrapped: when it cannot be (it runs only inside
another object's method, or steps its own optimizer inside itself), the file is left unchanged
with MIG104, which names what was seen. Wrapping something else would let the replicas of the
trained module silently train apart.
"""

from __future__ import annotations

from migrate.steps.base import Context


def refuse_unwrappable(ctx: Context) -> None:
    if ctx.sites.unwrappable is None:
        return
    parts, node = ctx.sites.unwrappable
    text = "".join(part if isinstance(part, str) else str(ctx.position(part)[0]) for part in parts)
    ctx.report("MIG104", text, node)
    ctx.refused = True

