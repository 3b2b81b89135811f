"""Where `deepspeed.initialize` goes (analysis.ordering._last_preparation): after the statements
that still read, load or move the bare model before training starts, never past what trains."""

from __future__ import annotations

from migrate import DeepSpeedOptions, migrate_source

HEAD = """import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

LOOP = """    for xb, yb in loader:
        loss = nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def converted_lines(body: str) -> list[str]:
    result = migrate_source(HEAD + body + LOOP, "deepspeed", DeepSpeedOptions(), path="train.py")
    assert not result.error
    return [line.strip() for line in result.new.splitlines()]


def engine_line(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if "deepspeed.initialize(" in line)


def test_after_a_load_and_a_move_before_the_loop() -> None:
    lines = converted_lines("    print(model)\n    model.load_state_dict(torch.load('w.pt'))\n    model.to('cpu')\n")
    assert engine_line(lines) > lines.index("model.to('cpu')")
    assert engine_line(lines) < lines.index("for xb, yb in loader:")
    assert "model.module.load_state_dict(torch.load('w.pt'))" not in lines


def test_not_past_a_forward_before_the_loop() -> None:
    lines = converted_lines("    print(sum(p.numel() for p in model.parameters()))\n    model(torch.zeros(1, 8))\n"
                            "    print(model)\n")
    assert lines.index("print(sum(p.numel() for p in model.parameters()))") < engine_line(lines)
    assert engine_line(lines) < lines.index("model(torch.zeros(1, 8))")


def test_not_past_a_call_that_keeps_the_model() -> None:
    lines = converted_lines("    keeper = Keeper(model)\n    print(model)\n")
    assert engine_line(lines) < lines.index("keeper = Keeper(model)")
