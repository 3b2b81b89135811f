"""`migrate verify --then ARGS`: the second run resumes from what the first run saved.

The fast tests judge hand-made records (resume.py); the slow ones run `migrate verify --to-end
--then --resume` on a script that saves a checkpoint at its end and loads it with --resume: the
tool's conversion passes, a hand-made conversion that loads it on rank 0 only (after wrapping, so
DDP never broadcasts it) fails with the second run's parameters named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from migrate.cli import app
from migrate.verify.checks import Launch, RankRecord, VerifyResult
from migrate.verify.resume import check_resume, loaded_detail, with_resume

ROOT = Path(__file__).parents[2]
CONVERTED = "import torch\nmodel = DDP(model)\nloss = model(x)\noptimizer.step()\n"


def rank_record(rank: int, start: str | None, steps: list[str], nproc: int) -> RankRecord:
    """A rank that met model `0:Net` with parameters `start` at its first forward, then took a step
    per entry of `steps` (each the parameters after it)."""
    events: list[dict[str, Any]] = [{"kind": "start", "rank": rank, "root": "/w", "world_size": nproc},
                                    {"kind": "model", "index": 0, "name": "Net", "state_dict": {}, "params": start}]
    for n, params in enumerate(steps, 1):
        events += [{"kind": "input", "step": n, "model": "Net", "digest": f"in{rank}-{n}", "where": "train.py:3"},
                   {"kind": "step", "n": n, "optimizer": "SGD", "where": "train.py:4"},
                   {"kind": "params", "step": n, "params": {"0:Net": params}, "trained": [], "frozen": []}]
    events.append({"kind": "end", "outcome": "stopped", "steps": len(steps)})
    return RankRecord(rank=rank, events=events, stack="")


def launch(*ranks: RankRecord) -> Launch:
    return Launch(returncode=0, output="", records={r.rank: r for r in ranks}, timed_out=False)


def runs(converted_again_starts: tuple[str | None, str | None], original_again_start: str | None = "o3"
         ) -> tuple[tuple[Launch, Launch], tuple[Launch, Launch]]:
    """First runs end with o3 (original) and c3 (converted, both ranks); the second runs start from
    the given parameters."""
    firsts = (launch(rank_record(0, "o0", ["o1", "o2", "o3"], 1)),
              launch(*(rank_record(r, "c0", ["c1", "c2", "c3"], 2) for r in range(2))))
    agains = (launch(rank_record(0, original_again_start, ["o4", "o5", "o6"], 1)),
              launch(*(rank_record(r, start, ["c4", "c5", "c6"], 2) for r, start in enumerate(converted_again_starts))))
    return firsts, agains


def judged(firsts: tuple[Launch, Launch], agains: tuple[Launch, Launch]) -> VerifyResult:
    result = VerifyResult(script="train.py", target="ddp", status="passed", steps=3, nproc=2)
    check = check_resume(result, firsts, agains, ("--resume",), (), CONVERTED, "", compare=False)
    return with_resume(result, check)


def test_ranks_that_start_from_the_first_runs_last_weights_pass() -> None:
    result = judged(*runs(("c3", "c3")))
    check = result.checks[-1]
    assert (result.status, check.name, check.status) == ("passed", "resume", "passed")
    assert check.detail == ["the second run (--then --resume) started and reached 3 steps on every rank",
                            "every rank started from the weights the first run ended with, as the original does"]


def test_a_rank_that_does_not_load_what_was_saved_fails_by_name() -> None:
    result = judged(*runs(("c3", "c0")))
    check = result.checks[-1]
    assert result.status == "failed" and check.status == "failed"
    assert check.detail == ["rank 1 did not start from the weights the first run ended with (after step 3); the"
                            " original's second run does: it did not load what was saved"]


def test_nothing_is_asked_of_the_conversion_when_the_original_does_not_resume_either() -> None:
    detail, failed = loaded_detail(*runs(("c0", "c0"), original_again_start="o0"), nproc=2)
    assert not failed
    assert detail[0].startswith("the original's second run does not start from the weights its first run ended with")


def test_without_recorded_first_forward_parameters_it_cannot_tell_and_does_not_fail() -> None:
    detail, failed = loaded_detail(*runs((None, None), original_again_start=None), nproc=2)
    assert not failed
    assert detail == ["cannot tell whether the second runs loaded what the first saved: the runner recorded no"
                      " parameters at the first forward"]


def test_a_failing_check_of_the_second_run_fails_the_resume_with_its_detail() -> None:
    firsts, agains = runs(("c3", "c3"))
    agains[1].records[1].events[-2]["params"] = {"0:Net": "other"}  # rank 1 diverges after its third step
    check = judged(firsts, agains).checks[-1]
    assert check.status == "failed"
    assert check.detail[0].startswith("parameters: after step 3 the parameters of Net differ between ranks")


def test_then_is_split_like_a_shell_and_bad_quoting_is_refused(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = CliRunner().invoke(app, ["verify", "--then", "--resume 'a b", str(tmp_path / "train.py")])
    assert result.exit_code == 2
    assert "--then" in result.output and "No closing quotation" in result.output


# -- the whole command ----------------------------------------------------------------------------
TRAIN = """\
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--resume", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if args.resume:
    state = torch.load("checkpoint.pt")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 2))
loader = torch.utils.data.DataLoader(data, batch_size=4)
for x, y in loader:
    loss = (model(x) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "checkpoint.pt")
"""
# Loads the checkpoint on rank 0 only, after wrapping: rank 1 resumes from nothing.
WRONG = """\
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--resume", action="store_true")
args = parser.parse_args()
dist.init_process_group("gloo")

torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if args.resume and dist.get_rank() == 0:
    state = torch.load("checkpoint.pt")
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 2))
loader = torch.utils.data.DataLoader(data, batch_size=4, sampler=DistributedSampler(data, shuffle=False))
for x, y in loader:
    loss = (model(x) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if dist.get_rank() == 0:
    torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}, "checkpoint.pt")
dist.barrier()
dist.destroy_process_group()
"""


def verify_then(folder: Path, *extra: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.run([sys.executable, "-m", "migrate", "verify", "--report", "json", "--timeout", "60",
                              "--to-end", "--then", "--resume", *extra, "train.py"], cwd=folder, env=env,
                             capture_output=True, text=True, timeout=400)
    assert process.stdout, process.stderr
    return json.loads(process.stdout)


@pytest.mark.slow
def test_the_tools_conversion_resumes_and_a_rank_zero_only_load_fails(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "wrong.py").write_text(WRONG)
    report = verify_then(tmp_path)
    resume = next(c for c in report["checks"] if c["name"] == "resume")
    assert report["status"] == "passed" and resume["status"] == "passed", json.dumps(report, indent=1)
    report = verify_then(tmp_path, "--converted", "wrong.py")
    resume = next(c for c in report["checks"] if c["name"] == "resume")
    assert resume["status"] == "failed", json.dumps(report, indent=1)
    assert any(line.startswith("parameters: after step 1 the parameters of Linear differ between ranks")
               or line.startswith("rank 1 did not start from the weights the first run ended with")
               for line in resume["detail"]), resume["detail"]
