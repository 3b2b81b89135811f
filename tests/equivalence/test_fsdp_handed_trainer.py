"""FSDP2 on a trainer class handed the model and its optimizer by keyword (read from `**kwargs`),
which keeps a target network synced from the trained one, run for real (torchrun, 2 ranks, gloo).

Two conversions a reviewer rejected in real projects meet here: the shard must go in the caller
above the optimizer (sharded in `__init__`, after the optimizer was built over the parameters that
`fully_shard` replaces, the model never learns), and the target's sync must give every rank the
whole state dict (gathered with `cpu_offload`, the other ranks get `{}` and their load stops with
"Missing key(s)"). The converted run at half the batch per rank learns what the original learns.
Marked `full` (CI budget): scripts/test --full runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from migrate import migrate_source
from tests.equivalence.harness import assert_same_weights, run_python, run_torchrun

pytestmark = [pytest.mark.slow, pytest.mark.full]

SCRIPT = '''\
import argparse

import torch
import torch.nn as nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))

    def forward(self, x):
        return self.layers(x)


class Fitter:
    def __init__(self, *args, **kwargs):
        self.args = kwargs["args"]
        self.model = kwargs["model"].to(self.args.device)
        self.optimizer = kwargs["optimizer"]
        self.anchor_net = Regressor().to(self.args.device)
        self.refresh_anchor()

    def refresh_anchor(self):
        self.anchor_net.load_state_dict(self.model.state_dict())

    def fit(self, loader):
        for epoch in range(2):
            for step, (x, y) in enumerate(loader):
                x, y = x.to(self.args.device), y.to(self.args.device)
                with torch.no_grad():
                    anchor = self.anchor_net(x)
                loss = ((self.model(x) - y - 0.5 * anchor) ** 2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                if step % 2 == 1:
                    self.refresh_anchor()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--save", default=None)
    args = parser.parse_args()
    args.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = Regressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(128, 6), torch.randn(128, 3))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size)
    fitter = Fitter(model=model, optimizer=optimizer, args=args)
    fitter.fit(loader)
    if args.save:
        torch.save(fitter.model.state_dict(), args.save)


if __name__ == "__main__":
    main()
'''


def test_a_keyword_handed_trainer_with_a_synced_target_learns_what_the_original_learns(tmp_path: Path) -> None:
    original, converted = tmp_path / "original.py", tmp_path / "converted.py"
    original.write_text(SCRIPT)
    result = migrate_source(SCRIPT, "fsdp", path=str(converted))
    assert result.new != SCRIPT, [(f.code, f.message) for f in result.findings]
    lines = [line.strip() for line in result.new.splitlines()]
    assert lines.index("fully_shard(model)") < lines.index("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)")
    converted.write_text(result.new)
    reference = run_python(original, ["--batch-size", "16"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, ["--batch-size", "8"], tmp_path / "fsdp.pt")
    assert_same_weights(two_ranks.weights, reference.weights)
    torch.manual_seed(0)
    start = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3)).state_dict()
    assert (two_ranks.weights["layers.0.weight"] - start["0.weight"]).abs().max() > 1e-3  # it trained
