"""A converted script run as plain `python train.py` fills in only the launcher variables that are
missing: a single process rendezvous on a free port (MASTER_PORT=0), so two such runs on one
machine do not collide (not even while 29500, torchrun's default, is taken), and a MASTER_PORT the
user set is kept.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from migrate import migrate_source

pytestmark = pytest.mark.slow  # starts real training processes

TIMEOUT_S = 180
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")

SCRIPT = '''\
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="model.pt")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    loader = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=16, shuffle=True)
    model = nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item():.4f}")
    torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
'''

# Runs the script as __main__, then reports the rendezvous port it used.
REPORT_PORT = (
    "import os, runpy, sys; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__'); print('MASTER_PORT=' + os.environ['MASTER_PORT'])"
)


@pytest.fixture
def converted(tmp_path: Path) -> Path:
    result = migrate_source(SCRIPT, "ddp", path="train.py")
    assert not result.error, result.findings
    script = tmp_path / "train.py"
    script.write_text(result.new)
    return script


@pytest.fixture
def port_29500_taken() -> Iterator[None]:
    """Hold torchrun's default port (if something else holds it, it is taken all the same)."""
    holder = socket.socket()
    try:
        holder.bind(("", 29500))
        holder.listen()
    except OSError:
        pass
    try:
        yield
    finally:
        holder.close()


def plain_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra)
    if not os.environ.get("MIGRATE_TEST_CUDA"):
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_plain_runs_at_once_while_29500_is_taken(converted: Path, port_29500_taken: None) -> None:
    runs = [
        subprocess.Popen(
            [sys.executable, str(converted), "--out", str(converted.parent / f"model{i}.pt")],
            cwd=converted.parent, env=plain_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    for i, run in enumerate(runs):
        stdout, stderr = run.communicate(timeout=TIMEOUT_S)
        assert run.returncode == 0, f"run {i}: exit {run.returncode}\n{stdout}\n{stderr[-4000:]}"
        assert stdout.count("epoch 1:") == 1, stdout
        assert (converted.parent / f"model{i}.pt").exists()


def test_a_master_port_the_user_set_is_kept(converted: Path) -> None:
    port = str(free_port())
    run = subprocess.run(
        [sys.executable, "-c", REPORT_PORT, str(converted), "--out", str(converted.parent / "model.pt")],
        cwd=converted.parent, env=plain_environment(MASTER_PORT=port), capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-4000:]}"
    assert f"MASTER_PORT={port}" in run.stdout.splitlines()


def test_without_a_launcher_the_port_is_any_free_one(converted: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", REPORT_PORT, str(converted), "--out", str(converted.parent / "model.pt")],
        cwd=converted.parent, env=plain_environment(), capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-4000:]}"
    assert "MASTER_PORT=0" in run.stdout.splitlines()
