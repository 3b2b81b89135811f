"""`--to-end`: the script runs to completion on every rank, and what fails after training is found.

The fast tests run the runner's `run_script` in this process (its hooks installed, then removed)
on small scripts; they also show that the launcher's `--local_rank=N` reaches the script before
its own arguments, where the deepspeed launcher puts it, so a parser with subcommands accepts it.
The slow ones run `migrate verify --to-end` on tests/verify/scripts/final_eval.py with a DDP
conversion whose final evaluation reads a submodule through the wrapper (it fails after the
training, at that line) and with the right one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from migrate.verify.runner import Probe, install_training_hooks, parse, run_script  # noqa: E402

SCRIPTS = Path(__file__).parent / "scripts"

TRAINS_THEN_FAILS = '''\
import torch

model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(4, 3)
for step in range(5):
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model(x)
raise RuntimeError("the final test fails")
'''

SUBCOMMANDS = '''\
import argparse, json, pathlib

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)
commands = parser.add_subparsers(dest="command", required=True)
train = commands.add_parser("train")
train.add_argument("--lr", type=float, default=0.1)
arguments = parser.parse_args()
pathlib.Path(__file__).with_name("parsed.json").write_text(json.dumps(vars(arguments)))
'''


class Events:
    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.folder = str(root / "records")
        self.events: list[dict[str, Any]] = []

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append({"kind": kind, **fields})

    def user_frame(self, within: int = 1000) -> None:
        return None


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, first: tuple[str, ...] = (),
        extra: tuple[str, ...] = (), script_args: tuple[str, ...] = ()) -> tuple[int, Events, Probe]:
    """run_script on `text` (saved as script.py), as the runner runs it in each rank: `first` are
    the runner's arguments before its own (the launcher's), `extra` its options."""
    script = tmp_path / "script.py"
    script.write_text(text)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    options = parse([*first, "--record", str(tmp_path / "records"), "--root", str(tmp_path), "--steps", "3",
                     *extra, str(script), *script_args])
    recorder = Events(tmp_path)
    probe = Probe(recorder, options.steps, to_end=options.to_end)  # type: ignore[arg-type]
    remove = install_training_hooks(probe)
    try:
        status = run_script(options, recorder, probe)  # type: ignore[arg-type]
    finally:
        remove()
    return status, recorder, probe


def end(recorder: Events) -> dict[str, Any]:
    return [e for e in recorder.events if e["kind"] == "end"][-1]


def test_without_to_end_the_rank_stops_after_its_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status, recorder, probe = run(tmp_path, monkeypatch, TRAINS_THEN_FAILS)
    assert status == 0
    assert end(recorder)["outcome"] == "stopped" and probe.total == 3


def test_to_end_runs_past_the_steps_and_records_the_crash_after_training(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    status, recorder, probe = run(tmp_path, monkeypatch, TRAINS_THEN_FAILS, extra=("--to-end",))
    assert status == 1
    ended = end(recorder)
    assert ended["outcome"] == "error" and ended["steps"] == 5 and probe.total == 5
    assert ended["where"] == "script.py:12"
    assert "RuntimeError: the final test fails" in ended["error"]


def test_the_launcher_s_local_rank_comes_before_the_script_s_own_arguments(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The deepspeed launcher runs `python -m MODULE --local_rank=N ARGS...`."""
    status, recorder, _ = run(tmp_path, monkeypatch, SUBCOMMANDS, first=("--local_rank=1",),
                               script_args=("train", "--lr", "2"))
    assert status == 0, end(recorder)
    assert json.loads((tmp_path / "parsed.json").read_text()) == {"local_rank": 1, "command": "train", "lr": 2.0}


# -- through `migrate verify --to-end` -----------------------------------------------------------
RIGHT = (SCRIPTS / "final_eval_ddp.py").read_text()
THROUGH_THE_WRAPPER = RIGHT.replace("model.module.body[0](inputs[:4])", "model.body[0](inputs[:4])")


def verify(folder: Path, converted: str, *options: str) -> tuple[int, dict]:
    shutil.copy(SCRIPTS / "final_eval.py", folder / "train.py")
    (folder / "converted.py").write_text(converted)
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", *options, "--converted",
               str(folder / "converted.py"), str(folder / "train.py")]
    process = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert process.stdout, process.stderr
    return process.returncode, json.loads(process.stdout)


def detail(report: dict, name: str) -> str:
    return "\n".join(next(c["detail"] for c in report["checks"] if c["name"] == name))


@pytest.mark.slow
def test_to_end_finds_a_final_evaluation_through_the_wrapper_with_its_line(tmp_path: Path) -> None:
    assert THROUGH_THE_WRAPPER != RIGHT
    code, report = verify(tmp_path, THROUGH_THE_WRAPPER, "--to-end")
    assert code == 1, json.dumps(report, indent=1)
    steps = detail(report, "steps")
    assert "has no attribute 'body'" in steps
    assert "at train.py:39: `first = model.body[0](inputs[:4])`" in steps


@pytest.mark.slow
def test_to_end_passes_the_right_conversion(tmp_path: Path) -> None:
    code, report = verify(tmp_path, RIGHT, "--to-end")
    assert code == 0, json.dumps(report, indent=1)
    assert "2 ranks ran the script to its end (8, 8 steps)" in detail(report, "steps")
