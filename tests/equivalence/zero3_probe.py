"""Runs a converted script as `__main__` and records whether ZeRO-3 really partitions the model's
parameters on this rank while it trains.

    deepspeed --num_gpus N zero3_probe.py [--local_rank=R] SCRIPT [SCRIPT_ARGS...]

The script is not edited: `deepspeed.initialize` is wrapped to keep the engines it returns, and
two of torch's global hooks write one JSON line per engine to
`<SCRIPT's folder>/zero3_probe.rank<R>.jsonl`:
- "forward": a global forward pre-hook, when the engine's model (the user's module) starts a
  forward, or one of its modules when the engine is built over a ModuleDict the script never
  calls (it calls each module itself). Global pre-hooks run before the module's own, so DeepSpeed has not gathered anything
  for this forward yet: what is whole here stayed whole since the last step or forward;
- "step": an optimizer step post-hook, for the engine whose optimizer stepped (every engine when
  that cannot be told). ZeRO-3 steps the user's optimizer on flat fp32 shards, so this fires in
  the middle of training, outside any forward.
Each line names its engine (`engine`: the order of its deepspeed.initialize), so a script with an
engine per model (a GAN) is checked engine by engine.
A partitioned parameter (DeepSpeed's runtime/zero/partition_parameters.py) has `ds_status ==
ZeroParamStatus.NOT_AVAILABLE`, an empty `data` (`p.numel() == 0`), its full size in `ds_numel`
and this rank's slice in `ds_tensor`. A persistent one (`ds_persist`: at most
stage3_param_persistence_threshold elements, 1e5 by default) is partitioned only around the
step and gathered again right after it, so at a forward's start it is whole.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

RECORD = "zero3_probe.rank{rank}.jsonl"


def split_arguments(argv: list[str]) -> tuple[str, list[str]]:
    """(SCRIPT, its sys.argv[1:]): the launcher puts `--local_rank=R` before SCRIPT; it belongs to
    the script, after its own arguments."""
    launcher = []
    while argv and argv[0].startswith(("--local_rank", "--local-rank")):
        launcher.append(argv.pop(0))
    script, *rest = argv
    return script, [*rest, *launcher]


def summary(engine: Any, number: int, event: str, step: int) -> dict[str, Any]:
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    params = list(engine.module.parameters())
    zero = [p for p in params if hasattr(p, "ds_id")]
    return {
        "event": event,
        "engine": number,
        "step": step,
        "stage": engine.zero_optimization_stage(),
        "params": len(params),
        "zero_params": len(zero),
        "persistent": sum(bool(getattr(p, "ds_persist", False)) for p in zero),
        "not_available": sum(p.ds_status == ZeroParamStatus.NOT_AVAILABLE for p in zero),
        "empty": sum(p.numel() == 0 for p in params),
        "full_numel": sum(int(p.ds_numel) for p in zero),
        "held_numel": sum(p.numel() for p in params),
        "shard_numel": sum(p.ds_tensor.numel() for p in zero if p.ds_tensor is not None),
    }


def install(record: Path) -> None:
    import deepspeed
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook

    engines: list[Any] = []
    steps = [0]
    real_initialize = deepspeed.initialize

    def initialize(*args: Any, **kwargs: Any) -> Any:
        result = real_initialize(*args, **kwargs)
        engines.append(result[0])
        return result

    def write(event: str, chosen: list[Any]) -> None:
        with record.open("a") as out:
            for engine in chosen:
                out.write(json.dumps(summary(engine, engines.index(engine), event, steps[0])) + "\n")

    def before_forward(module: Any, args: Any) -> None:
        write("forward", [engine for engine in engines if engine.module is module or _member(engine.module, module)])

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        steps[0] += 1
        stepped = [engine for engine in engines if getattr(engine.optimizer, "optimizer", engine.optimizer) is optimizer]
        write("step", stepped or engines)

    deepspeed.initialize = initialize
    register_module_forward_pre_hook(before_forward)
    register_optimizer_step_post_hook(after_step)


def _member(container: Any, module: Any) -> bool:
    """`module` is one of the modules of an engine built over a ModuleDict (one optimizer
    training several modules the script calls itself): the engine's own forward never runs."""
    from torch import nn

    return isinstance(container, nn.ModuleDict) and any(module is child for child in container.children())


def read_records(folder: Path) -> dict[int, list[dict[str, Any]]]:
    """{rank: [summary after each optimizer step, ...]} written by the probe in `folder`."""
    records = {}
    for path in sorted(folder.glob(RECORD.format(rank="*"))):
        rank = int(path.stem.removeprefix("zero3_probe.rank"))
        records[rank] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


def main() -> None:
    script, arguments = split_arguments(sys.argv[1:])
    script = str(Path(script).resolve())
    record = Path(script).parent / RECORD.format(rank=os.environ.get("RANK", "0"))
    record.unlink(missing_ok=True)
    install(record)
    sys.argv = [script, *arguments]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
