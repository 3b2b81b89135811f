"""scale_lr (--scale-lr): each optimizer's learning rate is multiplied by the world size; an
optimizer on its default learning rate is reported, since there is no number to scale."""

from __future__ import annotations

from migrate.steps.scale_lr import scale_lr
from tests.steps.helpers import run_step

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main(fine_tune=False):
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    body = nn.Linear(4, 4)
    head = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(body.parameters(), lr=0.1)
    head_optimizer = torch.optim.Adam(head.parameters())
    for x, y in loader:
        loss = nn.functional.mse_loss(head(body(x)), y)
        optimizer.zero_grad()
        head_optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        head_optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_without_the_option_nothing_changes() -> None:
    result = run_step(scale_lr, SCRIPT)
    assert result.text == result.source
    assert result.findings == ()


def test_the_learning_rate_is_multiplied_by_the_world_size() -> None:
    result = run_step(scale_lr, SCRIPT, scale_lr=True)
    assert result.removed == ["    optimizer = torch.optim.SGD(body.parameters(), lr=0.1)",
                              "    head_optimizer = torch.optim.Adam(head.parameters())"]
    assert result.added == ["    optimizer = torch.optim.SGD(body.parameters(), lr=0.1 * dist.get_world_size())",
                            "    head_optimizer = torch.optim.Adam(head.parameters(), lr=1e-3 * dist.get_world_size())"]
    assert result.imports == ["import torch.distributed as dist"]


def test_torch_s_default_learning_rate_is_written_out_and_scaled() -> None:
    """Adam's default (1e-3 in torch 2.13) is scaled like a rate the script gives."""
    result = run_step(scale_lr, SCRIPT, scale_lr=True)
    assert "    head_optimizer = torch.optim.Adam(head.parameters(), lr=1e-3 * dist.get_world_size())\n" in result.text
    assert result.codes == []


def test_an_optimizer_whose_default_is_not_known_here_is_reported() -> None:
    result = run_step(scale_lr, SCRIPT.replace("torch.optim.Adam(head.parameters())", "torch.optim.Adafactor(head.parameters())"),
                      scale_lr=True)
    assert "    head_optimizer = torch.optim.Adafactor(head.parameters())\n" in result.text
    assert result.codes == [("MIG004", 11)]
    assert "lr=<default> * dist.get_world_size()" in result.findings[0].message


def test_a_compound_learning_rate_is_scaled_as_a_whole() -> None:
    result = run_step(scale_lr, SCRIPT.replace("lr=0.1", "lr=0.01 if fine_tune else 0.1"), scale_lr=True)
    assert result.added[0] == (
        "    optimizer = torch.optim.SGD(body.parameters(), lr=(0.01 if fine_tune else 0.1) * dist.get_world_size())")
