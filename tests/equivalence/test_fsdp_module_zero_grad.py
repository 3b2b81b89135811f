"""FSDP2 with `model.zero_grad()` between a forward and its backward (a GAN's generator step:
`logit = D(G(z))`, `G.zero_grad()`, `loss.backward()`), and after a forward under no_grad, run for
real (torchrun, 2 ranks, gloo).

FSDP2 keeps the root's gathered weights after a forward, so that `zero_grad()` cleared the gathered
copies and each step stepped the sum of every earlier gradient (a reviewer measured the norm
doubling, then tripling). The conversion puts `G.reshard()` above it; the converted run at half the
batch per rank learns what the original learns.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate import migrate_source
from tests.equivalence.harness import assert_same_weights, run_python, run_torchrun

pytestmark = [pytest.mark.slow]

SCRIPT = '''\
import argparse

import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--save", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(128, 6), torch.randn(128, 3))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size)
    for epoch in range(2):
        for x, y in loader:
            with torch.no_grad():
                model(x)
            loss = ((model(x) - y) ** 2).mean()
            model.zero_grad()
            loss.backward()
            optimizer.step()
    if args.save:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
'''


def test_a_module_zero_grad_after_its_forward_clears_what_the_optimizer_steps(tmp_path: Path) -> None:
    original, converted = tmp_path / "original.py", tmp_path / "converted.py"
    original.write_text(SCRIPT)
    result = migrate_source(SCRIPT, "fsdp", path=str(converted))
    lines = [line.strip() for line in result.new.splitlines()]
    assert lines[lines.index("model.zero_grad()") - 1].startswith("model.reshard()  # FSDP2 keeps the gathered weights")
    converted.write_text(result.new)
    reference = run_python(original, ["--batch-size", "16"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, ["--batch-size", "8"], tmp_path / "fsdp.pt")
    assert_same_weights(two_ranks.weights, reference.weights)
