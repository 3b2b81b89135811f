"""distributed_sampler: the training DataLoader draws through a DistributedSampler (its shuffle moved
into the sampler), set_epoch runs first in every epoch; evaluation loaders and loaders with their
own sampler are left whole."""

from __future__ import annotations

from migrate.steps.distributed_sampler import distributed_sampler
from tests.steps.helpers import run_step

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""

WITH_EVALUATION = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    train_set = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    train_loader = DataLoader(train_set, batch_size=8)
    val_loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in train_loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for x, y in val_loader:
                print(nn.functional.mse_loss(model(x), y).item())
"""

OWN_SAMPLER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
loader = DataLoader(dataset, batch_size=8, sampler=RandomSampler(dataset))
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_the_training_loader_gets_a_sampler_and_each_epoch_sets_its_epoch() -> None:
    result = run_step(distributed_sampler, SCRIPT)
    assert result.removed == ["    loader = DataLoader(dataset, batch_size=8, shuffle=True)"]
    assert result.added == [
        "    loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True))",
        "        loader.sampler.set_epoch(epoch)",
    ]
    assert "        loader.sampler.set_epoch(epoch)\n        for x, y in loader:\n" in result.text
    assert "from torch.utils.data.distributed import DistributedSampler" in result.imports
    assert result.findings == ()


def test_keep_global_batch_divides_the_batch_among_the_ranks() -> None:
    result = run_step(distributed_sampler, SCRIPT, keep_global_batch=True)
    assert result.added[0] == (
        "    loader = DataLoader(dataset, batch_size=max(1, 8 // dist.get_world_size()), "
        "sampler=DistributedSampler(dataset, shuffle=True))"
    )


def test_an_evaluation_loader_is_left_whole_and_an_unshuffled_sampler_needs_no_set_epoch() -> None:
    """Only the training loader changes: the validation loader reads the whole set on every rank,
    and a sampler that keeps the order (shuffle=False) draws the same order every epoch."""
    result = run_step(distributed_sampler, WITH_EVALUATION)
    assert result.removed == ["    train_loader = DataLoader(train_set, batch_size=8)"]
    assert result.added == [
        "    train_loader = DataLoader(train_set, batch_size=8, sampler=DistributedSampler(train_set, shuffle=False))",
    ]
    assert result.findings == ()


def test_a_loader_with_its_own_sampler_is_kept_and_reported() -> None:
    result = run_step(distributed_sampler, OWN_SAMPLER)
    assert result.text == result.source
    assert result.codes == [("MIG102", 6)]


def test_keep_global_batch_divides_a_positional_batch_size_too() -> None:
    result = run_step(distributed_sampler, SCRIPT.replace("batch_size=8", "8"), keep_global_batch=True)
    assert "max(1, 8 // dist.get_world_size())" in result.added[0]


def test_a_loader_built_from_a_dict_is_sharded_or_reported() -> None:
    script = SCRIPT.replace(
        "    loader = DataLoader(dataset, batch_size=8, shuffle=True)\n",
        "    loader_args = dict(dataset=dataset, batch_size=8, shuffle=True)\n    loader = DataLoader(**loader_args)\n",
    )
    result = run_step(distributed_sampler, script)
    assert result.text == result.source
    assert [code for code, _line in result.codes] == ["MIG101"]
    assert "gets its dataset through `**loader_args`" in result.findings[0].message


def test_an_epoch_loop_written_on_one_line_is_reported_not_crashed_on() -> None:
    """`for epoch in range(3): train(...)`: no statement can go before a one-line body."""
    script = SCRIPT.replace("    for epoch in range(3):\n        for x, y in loader:", "    def train():\n        for x, y in loader:")
    script = script.replace("            optimizer.step()\n", "            optimizer.step()\n    for epoch in range(3): train()\n")
    result = run_step(distributed_sampler, script)
    assert "sampler=DistributedSampler(dataset, shuffle=True)" in result.text
    assert "set_epoch" not in result.text
    assert [code for code, _line in result.codes] == ["MIG103"]
    assert "is written on one line" in result.findings[0].message
