"""Folder runs at -j 1 and -j N: files per second of `migrate to-ddp --quiet FOLDER` (the diff to
/dev/null), printed, not asserted.

Two folders: the corpus scripts (.corpus/scripts, see "A run over real scripts" in README.md) and
the first --files .py files under .venv's site-packages/torch (tests left out), copied into a
temporary folder (a folder search skips site-packages itself). Each run is a whole command, start-up
included; the best of --repeat runs counts. The machine's load is printed beside the figures: on a
shared machine the speed-up of -j 2 is what the other work leaves.

Run: .venv/bin/python benchmarks/folder_speed.py [--files 2000] [--jobs 1,2] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / ".corpus" / "scripts"


def torch_files(count: int) -> tuple[Path, list[Path]]:
    """site-packages/torch, and its first `count` .py files (sorted), tests left out."""
    torch = next((ROOT / ".venv" / "lib").glob("python3*/site-packages/torch"))
    found = sorted(p for p in torch.rglob("*.py") if "test" not in p.relative_to(torch).as_posix())
    return torch, found[:count]


def copied(files: list[Path], base: Path, into: Path) -> Path:
    for path in files:
        target = into / path.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return into


def timed_run(folder: Path, jobs: int) -> tuple[float, int]:
    """Seconds of one `migrate to-ddp -j N --quiet FOLDER`, and its exit status."""
    command = [sys.executable, "-m", "migrate", "to-ddp", "--quiet", "-j", str(jobs), folder.name]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, done.returncode


def measure(name: str, folder: Path, count: int, jobs: list[int], repeat: int) -> None:
    base = None
    for n in jobs:
        seconds = min(timed_run(folder, n)[0] for _ in range(repeat))
        base = base or seconds
        print(f"| {name} | {count} | -j {n} | {seconds:.1f} s | {count / seconds:.1f} | {base / seconds:.2f}x | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000, help="site-packages files to convert")
    parser.add_argument("--jobs", default="1,2", help="comma-separated -j values")
    parser.add_argument("--repeat", type=int, default=1, help="runs per figure (the best counts)")
    args = parser.parse_args()
    jobs = [int(n) for n in args.jobs.split(",")]
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.1f}")
    print("| folder | files | jobs | wall | files/s | speed-up | load |\n|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as temporary:
        if CORPUS.is_dir():
            scripts = sorted(CORPUS.glob("*.py"))
            folder = copied(scripts, CORPUS, Path(temporary) / "corpus")
            measure("corpus scripts", folder, len(scripts), jobs, args.repeat)
        else:
            print(f"(no {CORPUS}: the corpus figures are left out)")
        torch, files = torch_files(args.files)
        folder = copied(files, torch, Path(temporary) / "torch")
        measure("site-packages/torch", folder, len(files), jobs, args.repeat)


if __name__ == "__main__":
    main()
