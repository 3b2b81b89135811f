"""Steps per second of each sample before and after `migrate to-ddp`, on whatever device the
scripts pick (CUDA when visible). The converted script runs under torchrun with one process,
so the figure shows the wrapper's own overhead. Whole-run wall time includes start-up, so
the figures compare, they do not rate the hardware.

Run: .venv/bin/python benchmarks/gpu_throughput.py [--epochs N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from migrate import migrate_source  # noqa: E402

DATASET = 256
BATCH = 16


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    steps = args.epochs * DATASET // BATCH
    run_args = ["--epochs", str(args.epochs), "--batch-size", str(BATCH)]
    print(f"{'sample':18} {'original steps/s':>16} {'converted steps/s':>17}")
    for script in sorted(ROOT.glob("samples/*/train.py")):
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            (work / "original.py").write_text(script.read_text())
            (work / "converted.py").write_text(migrate_source(script.read_text(), "ddp", path="converted.py").new)
            original = timed([sys.executable, "original.py", *run_args], work)
            torchrun = str(Path(sys.executable).parent / "torchrun")
            converted = timed([torchrun, "--standalone", "--nproc_per_node=1", "converted.py", *run_args], work)
        print(f"{script.parent.name:18} {steps / original:16.1f} {steps / converted:17.1f}")


if __name__ == "__main__":
    main()
