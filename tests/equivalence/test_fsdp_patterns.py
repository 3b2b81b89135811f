"""FSDP on two shapes a reviewer rejected in real scripts, run for real (torchrun, 2 ranks, gloo):

- an optimizer built by a method of the model (`configure_optimizers`, parameter groups): it must
  not be registered as a forward method (registration gathered and resharded around it, and the
  optimizer then held parameters that never changed: embeddings 0.0 change after 30 steps). The
  converted run learns what the original learns at twice the batch, embeddings included.
- a submodule cast to its own dtype (`model.body.to(torch.bfloat16)`): in one unit with fp32
  parameters FSDP2 stops at the first forward ("FSDP expects uniform original parameter dtype");
  sharded as its own unit it trains.
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


class TinyLM(nn.Module):
    def __init__(self, vocab=32, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.body = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))
        self.head = nn.Linear(width, vocab)

    def configure_optimizers(self, lr):
        decay = [p for n, p in self.named_parameters() if n.endswith("weight")]
        rest = [p for n, p in self.named_parameters() if not n.endswith("weight")]
        return torch.optim.SGD([{"params": decay, "weight_decay": 0.01}, {"params": rest}], lr=lr)

    def forward(self, idx):
        x = self.body(self.embed(idx).to(self.body[0].weight.dtype)).float()
        return self.head(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--save", default=None)
    parser.add_argument("--bf16-body", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TinyLM()
    if args.bf16_body:
        model.body.to(torch.bfloat16)
    optimizer = model.configure_optimizers(0.1)
    torch.manual_seed(1)
    data = torch.randint(0, 32, (128, 9))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size)
    for epoch in range(2):
        for batch in loader:
            logits = model(batch[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, 32), batch[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if args.save:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
'''


def converted_pair(folder: Path) -> tuple[Path, Path]:
    original, converted = folder / "original.py", folder / "converted.py"
    original.write_text(SCRIPT)
    result = migrate_source(SCRIPT, "fsdp", path=str(converted))
    assert not result.skipped and result.new != SCRIPT, [f.message for f in result.findings]
    assert "register_fsdp_forward_method" not in result.new  # configure_optimizers runs no layer
    converted.write_text(result.new)
    return original, converted


def test_an_optimizer_built_by_a_model_method_trains_every_parameter(tmp_path: Path) -> None:
    original, converted = converted_pair(tmp_path)
    reference = run_python(original, ["--batch-size", "16"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, ["--batch-size", "8"], tmp_path / "fsdp.pt")
    assert_same_weights(two_ranks.weights, reference.weights)
    torch.manual_seed(0)
    start = torch.nn.Embedding(32, 16).weight.detach()
    assert (two_ranks.weights["embed.weight"] - start).abs().max() > 1e-3  # the embeddings trained


def test_a_submodule_cast_to_bfloat16_is_its_own_unit_and_trains(tmp_path: Path) -> None:
    original, converted = converted_pair(tmp_path)
    assert "fully_shard(model.body, " in converted.read_text()  # its own unit, before the model's
    reference = run_python(original, ["--batch-size", "16", "--bf16-body"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, ["--batch-size", "8", "--bf16-body"], tmp_path / "fsdp.pt")
    assert two_ranks.weights["body.0.weight"].dtype == torch.bfloat16
    for name, weight in reference.weights.items():  # bfloat16 sums in another order: a loose bound
        assert torch.allclose(two_ranks.weights[name].float(), weight.float(), atol=0.05), name
