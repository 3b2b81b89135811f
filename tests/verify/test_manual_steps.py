"""A step is any change of the trained parameters between two forwards: hand-written updates count.

The fast tests drive the runner's Probe by hand (its forward hook called as torch would call it);
the slow ones run `migrate verify` on a script that updates its weights by hand
(tests/verify/scripts/manual_sgd.py) and on two DDP conversions of it: one that never averages the
gradients (its parameters drift apart) and the right one. Before, verify stopped on all three with
"took no optimizer step" (exit 2).
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

from migrate.verify.runner import Probe, StopVerify  # noqa: E402

SCRIPTS = Path(__file__).parent / "scripts"


class Events:
    """A recorder that keeps the events in memory."""

    root = "/nowhere"
    folder = "/nowhere/records"

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append({"kind": kind, **fields})

    def user_frame(self, within: int = 1000) -> None:
        return None

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]


def forward(probe: Probe, model: Any, x: Any) -> Any:
    """What torch does around a top-level forward with the probe's global hooks."""
    probe.forward_pre(model, (x,))
    try:
        return model(x)
    finally:
        probe.forward_post(model, (x,), None)


def train_by_hand(probe: Probe, update: str, steps: int) -> Any:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x = torch.randn(8, 4)
    for _ in range(steps):
        loss = forward(probe, model, x).pow(2).mean()
        loss.backward()
        if update == "data":
            for p in model.parameters():
                p.data -= 0.1 * p.grad
        elif update == "no_grad":
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad
        model.zero_grad()
    return model


@pytest.mark.parametrize("update", ["data", "no_grad"])
def test_a_hand_written_update_is_a_step(update: str) -> None:
    recorder = Events()
    probe = Probe(recorder, steps=10)
    train_by_hand(probe, update, 4)
    steps = recorder.of("step")
    assert [s["n"] for s in steps] == [1, 2, 3]  # the 4th update has no forward after it yet
    assert all(s["optimizer"] is None for s in steps)
    assert [p["step"] for p in recorder.of("params")] == [1, 2, 3]
    trained = recorder.of("params")[0]["trained"]
    assert sorted(name for _, name in trained) == ["bias", "weight"]


def test_forwards_without_a_change_are_not_steps() -> None:
    recorder = Events()
    probe = Probe(recorder, steps=10)
    train_by_hand(probe, "none", 4)
    assert recorder.of("step") == []


def test_the_run_stops_at_the_forward_after_the_last_hand_written_step() -> None:
    probe = Probe(Events(), steps=2)
    with pytest.raises(StopVerify):
        train_by_hand(probe, "data", 5)
    assert probe.total == 2


def test_an_optimizer_step_is_counted_once_however_many_forwards_follow() -> None:
    recorder = Events()
    probe = Probe(recorder, steps=10)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    for _ in range(3):
        forward(probe, model, x).pow(2).mean().backward()
        optimizer.step()
        probe.step_pre(optimizer, (), {})
        probe.step_post(optimizer, (), {})
        with torch.no_grad():  # an evaluation forward after each step
            forward(probe, model, x)
    assert [(s["n"], s["optimizer"]) for s in recorder.of("step")] == [(1, "SGD"), (2, "SGD"), (3, "SGD")]
    assert [p["step"] for p in recorder.of("params")] == [1, 2, 3]


# -- through `migrate verify` ------------------------------------------------------------------
def verify(folder: Path, converted: str) -> tuple[int, dict]:
    shutil.copy(SCRIPTS / "manual_sgd.py", folder / "train.py")
    (folder / "converted.py").write_text(converted)
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", "--converted",
               str(folder / "converted.py"), str(folder / "train.py")]
    process = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert process.stdout, process.stderr
    return process.returncode, json.loads(process.stdout)


def statuses(report: dict) -> dict[str, str]:
    return {check["name"]: check["status"] for check in report["checks"]}


def detail(report: dict, name: str) -> str:
    return "\n".join(next(c["detail"] for c in report["checks"] if c["name"] == name))


RIGHT = (SCRIPTS / "manual_sgd_ddp.py").read_text()
UNWRAPPED = RIGHT.replace("    model = DDP(model)\n", "")


@pytest.mark.slow
def test_verify_judges_a_conversion_of_a_hand_written_update(tmp_path: Path) -> None:
    code, report = verify(tmp_path, RIGHT)
    assert code == 0, json.dumps(report, indent=1)
    assert report["steps"] == 3
    assert statuses(report)["parameters"] == "passed"


@pytest.mark.slow
def test_hand_written_updates_of_unaveraged_gradients_drift_apart(tmp_path: Path) -> None:
    assert UNWRAPPED != RIGHT
    code, report = verify(tmp_path, UNWRAPPED)
    assert code == 1, json.dumps(report, indent=1)
    assert statuses(report)["parameters"] == "failed"
    assert "after step 1 the parameters of Net differ between ranks" in detail(report, "parameters")


def test_a_parameter_swapped_for_another_is_no_update() -> None:
    """FSDP2 swaps a module's sharded parameters for gathered ones during its forward."""
    from migrate.verify.params import changed

    assert changed({1: "a", 2: "b"}, {1: "a", 2: "c"})
    assert not changed({1: "a", 2: "b"}, {3: "x", 4: "y"})
    assert not changed({1: "a"}, {1: "a", 3: "x"})
