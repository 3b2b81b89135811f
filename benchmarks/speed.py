"""Speed figures for `migrate to-ddp`, printed, not asserted.

1. Conversion cost against libcst's own parse + code generation of the same file (target: <= 3x).
2. `migrate --help` start-up time (target: < 0.15 s).

Run: .venv/bin/python benchmarks/speed.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst

from migrate.api import migrate_source
from migrate.project_files import read_from_disk

ROOT = Path(__file__).resolve().parents[1]


def best_of(repeat: int, action) -> float:  # type: ignore[no-untyped-def]
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        timings.append(time.perf_counter() - start)
    return min(timings)


def conversion_ratios(repeat: int, target: str) -> None:
    """Each measurement is the best of `repeat` runs, baseline and conversion interleaved, so a
    busy moment on the machine does not land on one side only."""
    scripts = sorted(ROOT.glob("samples/*/train.py")) + sorted(p.with_name("input.py") for p in ROOT.glob("tests/cases/*/ddp.py"))
    ratios = []
    print(f"{'script':48} {'lines':>5} {'parse+gen ms':>12} {'to-' + target + ' ms':>14} {'ratio':>6}")
    for script in scripts:
        code = script.read_text()
        baseline, convert = float("inf"), float("inf")
        for _ in range(repeat):
            baseline = min(baseline, best_of(1, lambda: cst.parse_module(code).code))
            convert = min(convert, best_of(1, lambda: migrate_source(code, target, path=str(script), read_module=read_from_disk)))
        if "backward" not in code:
            continue  # skipped by the textual prefilter: no parse at all
        ratio = convert / baseline
        ratios.append(ratio)
        name = str(script.relative_to(ROOT))
        print(f"{name:48} {code.count(chr(10)):5d} {baseline * 1000:12.2f} {convert * 1000:14.2f} {ratio:6.2f}")
    print(f"to-{target}: ratio to parse+codegen: median {statistics.median(ratios):.2f}, max {max(ratios):.2f} (target <= 3)")


def help_startup(repeat: int) -> None:
    command = [str(Path(sys.executable).parent / "migrate"), "--help"]
    subprocess.run(command, capture_output=True, check=True)  # warm the file cache
    seconds = best_of(repeat, lambda: subprocess.run(command, capture_output=True, check=True))
    print(f"migrate --help: best of {repeat}: {seconds:.3f} s (target < 0.15 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for target in ("ddp", "deepspeed", "fsdp"):
        conversion_ratios(args.repeat, target)
    help_startup(args.repeat)


if __name__ == "__main__":
    main()
