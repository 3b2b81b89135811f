"""same_split: an unseeded random_split gets a seeded generator, so every rank splits the data
the same way; a split that is seeded already is left as it is."""

from __future__ import annotations

from migrate.steps.same_split import same_split
from tests.steps.helpers import run_step

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset, random_split


def main():
    dataset = TensorDataset(torch.randn(100, 4), torch.randn(100, 1))
    train_set, val_set = random_split(dataset, [80, 20])
    loader = DataLoader(train_set, batch_size=8, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

SPLIT = "    train_set, val_set = random_split(dataset, [80, 20])\n"


def test_an_unseeded_split_gets_a_seeded_generator_and_is_reported() -> None:
    result = run_step(same_split, SCRIPT)
    assert result.removed == [SPLIT.rstrip("\n")]
    assert result.added == [
        "    train_set, val_set = random_split(dataset, [80, 20], generator=torch.Generator().manual_seed(0))",
    ]
    assert result.imports == []
    assert result.codes == [("MIG004", 8)]


def test_a_split_after_manual_seed_in_its_function_is_left_as_it_is() -> None:
    seeded = SCRIPT.replace(SPLIT, "    torch.manual_seed(0)\n" + SPLIT)
    result = run_step(same_split, seeded)
    assert result.text == result.source
    assert result.findings == ()


def test_a_split_with_its_own_generator_is_left_as_it_is() -> None:
    own = SCRIPT.replace("[80, 20])", "[80, 20], generator=g)").replace("def main():", "def main(g=None):")
    result = run_step(same_split, own)
    assert result.text == result.source
    assert result.findings == ()


def test_a_seed_after_the_split_in_the_same_function_does_not_count() -> None:
    late = SCRIPT.replace(SPLIT, SPLIT + "    torch.manual_seed(0)\n")
    result = run_step(same_split, late)
    assert result.added == [
        "    train_set, val_set = random_split(dataset, [80, 20], generator=torch.Generator().manual_seed(0))",
    ]
    assert result.codes == [("MIG004", 8)]


MODULE_LEVEL = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset, random_split

dataset = TensorDataset(torch.randn(100, 4), torch.randn(100, 1))
train_set, val_set = random_split(dataset, [80, 20])
torch.manual_seed(0)
loader = DataLoader(train_set, batch_size=8, shuffle=True)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_module_level_seed_after_a_module_level_split_does_not_count() -> None:
    result = run_step(same_split, MODULE_LEVEL)
    assert result.added == [
        "train_set, val_set = random_split(dataset, [80, 20], generator=torch.Generator().manual_seed(0))",
    ]
    assert result.codes == [("MIG004", 6)]
