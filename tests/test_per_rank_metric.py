"""A number the training function returns from this rank's batches (`mean_loss = train_epoch(...)`)
that decides the LR (ReduceLROnPlateau) and a save: reduced over every rank where it is bound, so the
schedule and the save test agree on every rank; where it cannot be reduced, DeepSpeed at ZeRO-3
refuses (the gather under the per-rank `if` would hang) and MIG110 says it as a fact."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from migrate.api import migrate_source
from migrate.records import FileResult
from migrate.targets import targets
from tests import progress

SCRIPT = textwrap.dedent("""\
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset


    def fit_once(net, batches, optimizer):
        net.train()
        seen = []
        for inputs, targets in batches:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(net(inputs), targets)
            loss.backward()
            optimizer.step()
            seen.append(loss.item())
        return RETURNED


    def main():
        torch.manual_seed(0)
        batches = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
        net = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0)
        lowest = float("inf")
        for epoch in range(3):
            BOUND
            plateau.step(epoch_loss)
            if epoch_loss < lowest:
                torch.save(net.state_dict(), "best.pt")
                lowest = epoch_loss


    if __name__ == "__main__":
        main()
""")


def convert(returned: str, target: str, bound: str = "epoch_loss = fit_once(net, batches, optimizer)",
            **options: object) -> FileResult:
    code = SCRIPT.replace("RETURNED", returned).replace("BOUND", bound)
    return migrate_source(code, target, targets()[target].options_class(**options))  # type: ignore[arg-type]


def codes(result: FileResult) -> list[str]:
    return [f.code for f in result.findings]


def reduction_lines(text: str) -> list[str]:
    """The lines from the binding of `epoch_loss` to the scheduler's step."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "= fit_once(" in line)
    end = next(i for i, line in enumerate(lines) if "plateau.step(" in line)
    return [line.strip() for line in lines[start + 1:end]]


@pytest.mark.parametrize("returned", ["np.mean(seen)", "sum(seen) / len(seen)", "float(np.mean(seen))"])
def test_a_returned_mean_is_averaged_where_it_is_bound_under_ddp(returned: str) -> None:
    result = convert(returned, "ddp")
    assert reduction_lines(result.new) == [
        "# what fit_once returned covers this rank's batches only: the mean over every rank",
        "shared = torch.tensor(epoch_loss, dtype=torch.float64)",
        "dist.all_reduce(shared)",
        "epoch_loss = shared.item() / dist.get_world_size()",
    ]
    assert "MIG007" in codes(result) and "MIG110" not in codes(result)


SUMMED = SCRIPT.replace("seen = []", "total = 0.0").replace("seen.append(loss.item())", "total += loss.item()")


@pytest.mark.parametrize("returned, averaged", [("total / len(batches)", True), ("total / len(batches.dataset)", False),
                                                ("total", False)])
def test_a_running_sum_over_the_loader_is_averaged_and_over_the_dataset_summed(returned: str, averaged: bool) -> None:
    code = SUMMED.replace("RETURNED", returned).replace("BOUND", "epoch_loss = fit_once(net, batches, optimizer)")
    lines = reduction_lines(migrate_source(code, "ddp").new)
    assert lines[-1] == ("epoch_loss = shared.item() / dist.get_world_size()" if averaged else "epoch_loss = shared.item()")


def test_horovod_averages_the_returned_mean_with_hvd_allreduce() -> None:
    result = convert("np.mean(seen)", "horovod")
    assert reduction_lines(result.new)[-1] == (
        "epoch_loss = hvd.allreduce(torch.tensor(epoch_loss, dtype=torch.float64), op=hvd.Average).item()")
    assert "MIG405" in codes(result) and "MIG110" not in codes(result)


def test_deepspeed_zero3_reduces_the_metric_and_then_gathers_on_every_rank() -> None:
    result = convert("np.mean(seen)", "deepspeed", zero=3)
    lines = reduction_lines(result.new)
    # the script never moves its model: DeepSpeed stays on the CPU and its group is gloo (the golden case
    # per_rank_epoch_metric moves it, and its tensor follows the NCCL group's device)
    assert lines[1] == "shared = torch.tensor(epoch_loss, dtype=torch.float64)"
    assert "deepspeed.zero.GatheredParameters" in result.new and "MIG121" not in codes(result)


def test_a_metric_that_cannot_be_reduced_is_refused_under_zero3_and_stated_as_a_fact_under_ddp() -> None:
    bound = "epoch_loss, count = fit_once(net, batches, optimizer)"
    refused = convert("np.mean(seen), len(seen)", "deepspeed", bound=bound, zero=3)
    assert refused.new == refused.old
    [finding] = [f for f in refused.findings if f.code == "MIG121"]
    assert "`epoch_loss` is what `fit_once(...)` (line 27) returned after training on this rank's own batches" in finding.message
    ddp = convert("np.mean(seen), len(seen)", "ddp", bound=bound)
    [warning] = [f for f in ddp.findings if f.code == "MIG110"]
    assert warning.message.startswith("`plateau.step(epoch_loss)`: `epoch_loss` is what `fit_once(...)` (line 27) "
                                      "returned after training on this rank's own batches, so the ranks lower the LR")
    assert "shared" not in ddp.new


def test_a_sum_the_epoch_figures_already_reduce_is_not_reduced_again() -> None:
    code = SUMMED.replace("    return RETURNED", "    print(total / len(batches))\n    return total").replace(
        "BOUND", "epoch_loss = fit_once(net, batches, optimizer)")
    text = migrate_source(code, "ddp").new
    assert text.count("dist.all_reduce(") == 1 and "shared" not in text  # the printed sum only, after the loop


LR_LOG = textwrap.dedent("""\
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset


    LRS = []


    def fit_once(net, batches, optimizer):
        losses = []
        for inputs, targets in batches:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(net(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return np.mean(losses)


    def main():
        torch.manual_seed(0)
        inputs = torch.randn(64, 4)
        targets = inputs[:, :1] * 0 + torch.arange(64.0).unsqueeze(1) % 7  # the two halves differ a lot
        batches = DataLoader(TensorDataset(inputs, targets), batch_size=8)
        net = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, threshold=0.5)
        for epoch in range(6):
            epoch_loss = fit_once(net, batches, optimizer)
            plateau.step(epoch_loss)
            LRS.append(optimizer.param_groups[0]["lr"])


    if __name__ == "__main__":
        main()
""")


@pytest.mark.slow
@pytest.mark.full
def test_two_ddp_ranks_lower_the_lr_on_the_same_epoch(tmp_path: Path) -> None:
    converted = migrate_source(LR_LOG, "ddp").new
    assert "dist.all_reduce(shared)" in converted
    script = tmp_path / "train.py"
    # each rank writes the LRs it used (written after the conversion: the tool lets rank 0 alone write files)
    script.write_text(converted + "\nimport os, sys\nwith open(sys.argv[1] + '.' + os.environ['RANK'], 'w') as log:\n"
                      "    log.write(repr(LRS))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = progress.run_ranks([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                               str(script), str(tmp_path / "lrs")], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = ((tmp_path / f"lrs.{rank}").read_text() for rank in (0, 1))
    assert first == second and len(set(eval(first))) > 1  # the LR dropped, on the same epoch on both ranks
