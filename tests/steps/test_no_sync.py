"""no_sync: the micro-steps of gradient accumulation that end in no optimizer step run under
`model.no_sync()`, forward included, so gradients are all-reduced once per optimizer step."""

from __future__ import annotations

from migrate.steps.no_sync import no_sync
from tests.steps.helpers import run_step

ACCUMULATING = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y) / 4
            loss.backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""

EVERY_STEP = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 100 == 0:
            scheduler.step()


if __name__ == "__main__":
    main()
"""

FORWARD_IN_A_HELPER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def forward_loss(model, x, y):
    return nn.functional.mse_loss(model(x), y) / 4


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(loader):
        loss = forward_loss(model, x, y)
        loss.backward()
        if (i + 1) % 4 == 0:
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""


def test_the_micro_step_runs_under_no_sync_unless_the_optimizer_steps() -> None:
    result = run_step(no_sync, ACCUMULATING)
    expected = (
        "        for i, (x, y) in enumerate(loader):\n"
        "            with model.no_sync() if (i + 1) % 4 != 0 else contextlib.nullcontext():\n"
        "                loss = nn.functional.mse_loss(model(x), y) / 4\n"
        "                loss.backward()\n"
        "            if (i + 1) % 4 == 0:\n"
        "                optimizer.step()\n"
    )
    assert expected in result.text
    assert result.removed == ["            loss = nn.functional.mse_loss(model(x), y) / 4", "            loss.backward()"]
    assert result.imports == ["import contextlib"]
    assert result.findings == ()


def test_a_step_every_iteration_is_not_accumulation() -> None:
    """`if i % 100 == 0: scheduler.step()` steps a scheduler, not the model's optimizer."""
    result = run_step(no_sync, EVERY_STEP)
    assert result.text == result.source
    assert result.findings == ()


def test_a_forward_in_a_helper_given_the_model_runs_under_no_sync() -> None:
    result = run_step(no_sync, FORWARD_IN_A_HELPER)
    expected = (
        "        with model.no_sync() if (i + 1) % 4 != 0 else contextlib.nullcontext():\n"
        "            loss = forward_loss(model, x, y)\n"
        "            loss.backward()\n"
    )
    assert expected in result.text
    assert result.findings == ()


def test_accumulation_whose_forward_is_not_in_the_loop_body_is_reported() -> None:
    script = FORWARD_IN_A_HELPER.replace(
        "    for i, (x, y) in enumerate(loader):\n        loss = forward_loss(model, x, y)\n",
        "    losses = [forward_loss(model, x, y) for x, y in loader]\n    for i, (x, y) in enumerate(loader):\n"
        "        loss = losses[i]\n")
    result = run_step(no_sync, script)
    assert result.text == result.source
    assert result.codes == [("MIG109", 17)]
