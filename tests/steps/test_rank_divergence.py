"""rank_divergence: control flow that may differ between ranks is reported, never rewritten: a
loop left on this rank's loss (MIG121), a step skipped at random (MIG122), weights drawn again
after the wrapper copied rank 0's (MIG123; DDP only, rank_divergent_control leaves it out)."""

from __future__ import annotations

from migrate.steps.rank_divergence import rank_divergence, rank_divergent_control
from tests.steps.helpers import run_step

STEADY = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for trial in range(3):
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y)
            if step >= 100:
                break
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""

PER_RANK = (STEADY.replace("import torch\n", "import random\n\nimport torch\n", 1)
            .replace("if step >= 100:", "if loss.item() < 0.01:")
            .replace("            optimizer.zero_grad()\n", "            if random.random() < 0.5:\n                continue\n"
                     "            optimizer.zero_grad()\n"))

REINITIALISED = STEADY.replace("    for trial in range(3):\n", "    for trial in range(3):\n        model.reset_parameters()\n")


def test_a_loop_left_on_a_step_count_is_not_reported() -> None:
    result = run_step(rank_divergence, STEADY)
    assert result.text == result.source
    assert result.findings == ()


def test_a_loop_left_on_this_rank_s_loss_and_a_random_skip_are_reported_not_rewritten() -> None:
    result = run_step(rank_divergence, PER_RANK)
    assert result.text == result.source
    assert result.source.splitlines()[15 - 1].strip() == "if loss.item() < 0.01:"
    assert result.source.splitlines()[17 - 1].strip() == "if random.random() < 0.5:"
    assert result.codes == [("MIG121", 15), ("MIG122", 17)]


def test_weights_drawn_after_the_wrap_are_reported() -> None:
    result = run_step(rank_divergence, REINITIALISED)
    assert result.text == result.source
    assert result.codes == [("MIG123", 11)]
    assert result.findings[0].message.startswith("`model.reset_parameters()` (line 11) draws new weights for `model`")


def test_the_control_only_check_leaves_reinitialisation_alone() -> None:
    """DeepSpeed's engine is created elsewhere than DDP's wrap site: MIG123 is not its question."""
    result = run_step(rank_divergent_control, REINITIALISED, target="deepspeed")
    assert result.findings == ()
