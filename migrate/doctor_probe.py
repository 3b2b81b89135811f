"""What each process `migrate doctor` launches runs, under torchrun (`-m migrate.doctor_probe`).

It reads RANK, WORLD_SIZE and LOCAL_RANK as torchrun sets them, then, recording each step as one
JSON line in OUT/rank<R>.jsonl (flushed at once, so a hang shows how far each rank got):
start (its pid), init (`init_process_group` with --backend; nccl: the GPU LOCAL_RANK), all_reduce
(a tensor of rank + 1 everywhere summed: `got` and `expected` = n(n+1)/2), barrier, bandwidth
(--repetitions all-reduces of --bytes, after two to warm up: `seconds` each, the slowest rank's),
done. An exception is recorded as {"step": "error", "at": STEP, "error": "..."} and the exit
status is 1. The parent (migrate.doctor) turns the records into its verdict and bandwidths.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

KNOWN_ELEMENTS = 1024  # elements of the known tensor
WARM_UP = 2  # all-reduces before the timed ones


class Recorder:
    """Appends one JSON object a line to a rank's record file, flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, step: str, **values: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as stream:
            stream.write(json.dumps({"step": step, **values}) + "\n")
            stream.flush()


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m migrate.doctor_probe", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("gloo", "nccl"), required=True)
    parser.add_argument("--out", required=True, help="the folder of the rank<R>.jsonl records")
    parser.add_argument("--timeout", type=float, default=60.0, help="the process group's timeout, in seconds")
    parser.add_argument("--bytes", type=int, default=16 << 20, help="bytes of each timed all-reduce")
    parser.add_argument("--repetitions", type=int, default=5, help="timed all-reduces")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    record = Recorder(Path(args.out) / f"rank{rank}.jsonl")
    record("start", pid=os.getpid(), world_size=world, local_rank=local_rank)
    at = "init"
    try:
        import torch
        import torch.distributed as dist

        device = _device(torch, args.backend, local_rank)
        dist.init_process_group(args.backend, timeout=timedelta(seconds=args.timeout))
        record("init")
        at = "all_reduce"
        got, expected = known_sum(torch, dist, rank, world, device)
        record("all_reduce", got=got, expected=expected)
        at = "barrier"
        _barrier(dist, device)
        record("barrier")
        at = "bandwidth"
        seconds = timed_all_reduce(torch, dist, device, args.bytes, args.repetitions)
        record("bandwidth", bytes=args.bytes // 4 * 4, seconds=seconds, repetitions=args.repetitions)
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001 - every failure is recorded for the parent
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        record("error", at=at, error=f"{type(error).__name__}: {message}"[:500])
        return 1
    record("done")
    return 0


def _device(torch: Any, backend: str, local_rank: int) -> Any:
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def known_sum(torch: Any, dist: Any, rank: int, world: int, device: Any) -> tuple[float, float]:
    """All-reduce a tensor holding rank + 1 everywhere: (the value found, n(n+1)/2); the value
    found is the first element that differs, if one does."""
    tensor = torch.full((KNOWN_ELEMENTS,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(tensor)
    expected = float(world * (world + 1) // 2)
    wrong = (tensor != expected).nonzero()
    got = float(tensor[wrong[0, 0]].item()) if wrong.numel() else expected
    return got, expected


def timed_all_reduce(torch: Any, dist: Any, device: Any, size: int, repetitions: int) -> float:
    """Seconds one all-reduce of `size` bytes takes (float32), the slowest rank's average."""
    tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
    for _ in range(WARM_UP):
        dist.all_reduce(tensor)
    _synchronize(torch, device)
    _barrier(dist, device)
    begin = time.perf_counter()
    for _ in range(repetitions):
        dist.all_reduce(tensor)
    _synchronize(torch, device)
    took = torch.tensor([(time.perf_counter() - begin) / max(1, repetitions)], dtype=torch.float64, device=device)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    return float(took.item())


def _barrier(dist: Any, device: Any) -> None:
    dist.barrier(**({"device_ids": [device.index]} if device.type == "cuda" else {}))


def _synchronize(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


if __name__ == "__main__":
    sys.exit(main())
