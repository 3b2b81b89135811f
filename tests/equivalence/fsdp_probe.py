"""Runs a converted script as `__main__` and records how FSDP2 really shards its model.

    torchrun --nproc_per_node N fsdp_probe.py SCRIPT [SCRIPT_ARGS...]

The script is not edited: `torch.distributed.fsdp.fully_shard` is wrapped (before the script
imports it) to note each module it shards, in order, and an optimizer step post-hook notes, at the
first step of each optimizer, what its parameters are. One JSON line per event goes to
`<SCRIPT's folder>/fsdp_probe.rank<R>.jsonl`:
- "shard": the module's class, and for each of its parameters right after fully_shard returned:
  whether it is a DTensor, its placements, its global shape and this rank's local shape;
- "step": each parameter the optimizer holds: DTensor or not, global and local shapes.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

RECORD = "fsdp_probe.rank{rank}.jsonl"


def describe(parameter: Any) -> dict[str, Any]:
    from torch.distributed.tensor import DTensor

    sharded = isinstance(parameter, DTensor)
    return {
        "dtensor": sharded,
        "placements": [str(p) for p in parameter.placements] if sharded else [],  # Shard(dim=0) prints as S(0)
        "shape": list(parameter.shape),
        "local_shape": list(parameter.to_local().shape) if sharded else list(parameter.shape),
    }


def main() -> None:
    import torch.distributed.fsdp as fsdp
    from torch.optim.optimizer import register_optimizer_step_post_hook

    script, args = sys.argv[1], sys.argv[2:]
    rank = int(os.environ.get("RANK", "0"))
    record = open(Path(script).resolve().parent / RECORD.format(rank=rank), "w")  # noqa: SIM115

    def write(kind: str, **fields: Any) -> None:
        record.write(json.dumps({"kind": kind, **fields}) + "\n")
        record.flush()

    real_fully_shard = fsdp.fully_shard

    def fully_shard(module: Any, *more: Any, **options: Any) -> Any:
        result = real_fully_shard(module, *more, **options)
        write("shard", module=type(module).__name__.removeprefix("FSDP"),
              parameters={name: describe(p) for name, p in module.named_parameters()})
        return result

    fsdp.fully_shard = fully_shard
    stepped: set[int] = set()

    def step_post(optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if id(optimizer) in stepped:
            return
        stepped.add(id(optimizer))
        write("step", optimizer=type(optimizer).__name__,
              parameters=[describe(p) for group in optimizer.param_groups for p in group["params"]])

    register_optimizer_step_post_hook(step_post)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
