"""plateau_metric: ReduceLROnPlateau stepped on a metric is reported (the metric may come from
this rank's shard only); other schedulers and the script itself are left alone."""

from __future__ import annotations

from migrate.steps.scheduler_checks import plateau_metric
from tests.steps.helpers import run_step

SCRIPT = """\
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import ReduceLROnPlateau, StepLR
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = StepLR(optimizer, step_size=10)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()


if __name__ == "__main__":
    main()
"""

PLATEAU = (SCRIPT.replace("StepLR(optimizer, step_size=10)", 'ReduceLROnPlateau(optimizer, mode="min")')
           .replace("scheduler.step()", "scheduler.step(loss.item())"))


def test_a_scheduler_on_a_fixed_schedule_is_not_reported() -> None:
    result = run_step(plateau_metric, SCRIPT)
    assert result.text == result.source
    assert result.findings == ()


def test_a_plateau_scheduler_stepped_on_a_metric_is_reported_not_rewritten() -> None:
    result = run_step(plateau_metric, PLATEAU)
    assert result.text == result.source
    assert result.codes == [("MIG110", 18)]
    assert result.findings[0].message.startswith("`scheduler.step(loss.item())`: if this metric comes from this rank's data")
