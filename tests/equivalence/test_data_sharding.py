"""A real 2-rank DDP run (torchrun, gloo, CPU) of a script that draws its batches with
torch.randint after torch.manual_seed: once converted, each rank reseeds with the seed plus its
rank, so the ranks draw different batches, while their weights stay equal (DDP averages the
gradients). The run's weights are checked against both simulations, computed here in one process:
the replicas stepped with the average gradient of the two ranks' own batches (what must come out),
and the same with identical batches on both ranks (what an unsharded conversion gives)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn

from migrate import migrate_source
from tests.equivalence.harness import run_torchrun

pytestmark = [pytest.mark.slow, pytest.mark.full]

SEED, STEPS, BATCH, SPAN, VOCAB = 11, 6, 4, 3, 10
SCRIPT = f"""\
import argparse

import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", default="weights.pt")
    args = parser.parse_args()
    torch.manual_seed({SEED})
    stream = torch.arange(60) % {VOCAB}
    model = nn.Sequential(nn.Embedding({VOCAB}, 5), nn.Flatten(), nn.Linear(5 * {SPAN}, {VOCAB}))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range({STEPS}):
        ix = torch.randint(len(stream) - {SPAN}, ({BATCH},))
        x = torch.stack([stream[i:i + {SPAN}] for i in ix])
        y = stream[ix + {SPAN}]
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
"""


def simulate(seeds: list[int]) -> dict[str, torch.Tensor]:
    """Replicas that start from the seed's weights and step on the mean gradient of one batch per
    rank, rank r drawing from `seeds[r]`."""
    torch.manual_seed(SEED)
    stream = torch.arange(60) % VOCAB
    model = nn.Sequential(nn.Embedding(VOCAB, 5), nn.Flatten(), nn.Linear(5 * SPAN, VOCAB))
    draws = []
    for seed in seeds:
        torch.manual_seed(seed)
        draws.append([torch.randint(len(stream) - SPAN, (BATCH,)) for _ in range(STEPS)])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(STEPS):
        optimizer.zero_grad()
        for rank_draws in draws:
            ix = rank_draws[step]
            x = torch.stack([stream[i:i + SPAN] for i in ix])
            loss = nn.functional.cross_entropy(model(x), stream[ix + SPAN]) / len(draws)
            loss.backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_ranks_draw_their_own_batches_and_keep_equal_weights(tmp_path: Path) -> None:
    converted = tmp_path / "train.py"
    result = migrate_source(SCRIPT, "ddp", None, path=str(converted))
    assert not result.error and f"torch.manual_seed({SEED} + dist.get_rank())" in result.new
    converted.write_text(result.new)
    run = run_torchrun(converted, 2, [], tmp_path / "weights.pt")
    sharded, identical = simulate([SEED, SEED + 1]), simulate([SEED, SEED])
    assert run.weights.keys() == sharded.keys()
    for name, tensor in run.weights.items():
        torch.testing.assert_close(tensor, sharded[name], rtol=1e-5, atol=1e-6)
    assert any(not torch.allclose(run.weights[name], identical[name], atol=1e-4) for name in identical)
