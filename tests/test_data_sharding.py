"""Data every rank would read alike, without a DataLoader to shard: batches drawn from a seeded
global generator in the training loop are reseeded per rank (steps.per_rank_seed), and the
DistributedSampler goes on the loader that feeds the backward, not on one inside `evaluate()`."""

from __future__ import annotations

from migrate.steps.distributed_sampler import distributed_sampler
from migrate.steps.scale_lr import scale_lr_unless_declined
from tests.steps.helpers import run_step, run_steps

RANDOM_WINDOWS = """\
import argparse
import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    data = torch.arange(200)
    model = nn.Embedding(200, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for it in range(10):
        ix = torch.randint(len(data) - 4, (8,))
        loss = model(data[ix]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


main()
"""


def test_seeded_draws_are_reseeded_per_rank_before_the_loop() -> None:
    result = run_step(distributed_sampler, RANDOM_WINDOWS)
    assert result.added[-1].strip() == "torch.manual_seed(args.seed + dist.get_rank())"
    lines = result.text.splitlines()
    assert lines.index("    torch.manual_seed(args.seed + dist.get_rank())") + 1 == lines.index("    for it in range(10):")
    assert [code for code, _ in result.codes] == ["MIG008"]
    assert "each rank draws its own batches" in result.findings[0].message


def test_horovod_scales_the_rate_of_reseeded_draws_as_of_a_sampler() -> None:
    result = run_steps([distributed_sampler, scale_lr_unless_declined], RANDOM_WINDOWS, target="horovod")
    assert "    torch.manual_seed(args.seed + hvd.rank())" in result.text
    assert "lr=0.1 * hvd.size()" in result.text


def test_a_helper_that_seeds_every_generator_is_called_again_with_the_rank() -> None:
    code = RANDOM_WINDOWS.replace("import torch\n", "import random\nimport numpy as np\nimport torch\n\n\n"
                                  "def set_seed(seed):\n    random.seed(seed)\n    np.random.seed(seed)\n    torch.manual_seed(seed)\n")
    code = code.replace("    torch.manual_seed(args.seed)\n", "    set_seed(args.seed * 2)\n")
    code = code.replace("torch.randint(len(data) - 4, (8,))", "torch.tensor(np.random.randint(0, 196, size=8))")
    result = run_step(distributed_sampler, code)
    assert result.added[-1].strip() == "set_seed((args.seed * 2) + dist.get_rank())"


def test_an_unseeded_generator_already_differs_per_rank_and_is_left_alone() -> None:
    result = run_step(distributed_sampler, RANDOM_WINDOWS.replace("    torch.manual_seed(args.seed)\n", ""))
    assert result.added == []
    assert [code for code, _ in result.codes] == ["MIG008"]
    assert "never seeds" in result.findings[0].message


def test_a_random_number_of_backward_passes_is_not_reseeded() -> None:
    code = RANDOM_WINDOWS.replace("        loss.backward()\n",
                                  "        for _ in range(int(torch.randint(1, 3, (1,)))):\n            loss.backward(retain_graph=True)\n")
    result = run_step(distributed_sampler, code)
    assert not any("manual_seed" in line for line in result.added)
    assert [code for code, _ in result.codes] == ["MIG101"]
    assert "at random" in result.findings[0].message


def test_a_seed_set_again_inside_the_loop_is_not_reseeded() -> None:
    code = RANDOM_WINDOWS.replace("        ix = ", "        torch.manual_seed(it)\n        ix = ")
    result = run_step(distributed_sampler, code)
    assert result.added == []
    assert "seeded again inside the training loop (line 15)" in result.findings[0].message


EVALUATE_AND_ENDLESS = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def endless(loader):
    while True:
        yield from loader


def evaluate(model, dataset):
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    with torch.no_grad():
        return sum(float(model(x).sum()) for x, in loader)


def main():
    train_set = TensorDataset(torch.randn(64, 4))
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = endless(DataLoader(train_set, 8, True))
    for step in range(20):
        (x,) = next(batches)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(evaluate(model, train_set))


main()
"""


def test_the_loader_feeding_backward_through_yield_from_gets_the_sampler() -> None:
    result = run_step(distributed_sampler, EVALUATE_AND_ENDLESS)
    assert result.removed == ["    batches = endless(DataLoader(train_set, 8, True))"]
    assert result.added == ["    batches = endless(DataLoader(train_set, 8, sampler=DistributedSampler(train_set, shuffle=True)))"]


def test_an_evaluation_loader_is_not_sharded_in_place_of_an_untraced_training_one() -> None:
    code = EVALUATE_AND_ENDLESS.replace("    batches = endless(DataLoader(train_set, 8, True))\n",
                                        "    batches = [t[0] for t in train_set]\n")
    code = code.replace("    for step in range(20):\n        (x,) = next(batches)\n", "    for step, x in enumerate(batches):\n")
    result = run_step(distributed_sampler, code)
    assert result.added == []
    assert [code for code, _ in result.codes] == ["MIG101"]


SAME_NAME_IN_EVALUATE = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, test_set):
    loader = DataLoader(test_set, batch_size=100)
    with torch.no_grad():
        return sum(model(x).sum().item() for x, _ in loader)


def train_epoch(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def main():
    train_set = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))
    test_set = TensorDataset(torch.randn(32, 3), torch.randn(32, 1))
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(train_set, batch_size=8, shuffle=True)
    for epoch in range(2):
        train_epoch(model, loader, optimizer)
        print(evaluate(model, test_set))


main()
"""


def test_a_loader_of_the_same_name_inside_evaluate_is_not_the_training_one() -> None:
    """`loader` in evaluate() is bound in a scope no step loop reads it from: it stays whole."""
    result = run_step(distributed_sampler, SAME_NAME_IN_EVALUATE)
    assert "loader = DataLoader(test_set, batch_size=100)\n" in result.text
    assert "DataLoader(train_set, batch_size=8, sampler=DistributedSampler(train_set, shuffle=True))" in result.text
