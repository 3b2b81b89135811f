"""epoch_figures: the running sums an epoch line prints are all-reduced in one tensor after the
training loop, summed or averaged per sum, counts kept ints, on the device the target asks for."""

from __future__ import annotations

import pytest

from migrate.steps.epoch_figures import CURRENT_GPU_OR_CPU, epoch_figures_on
from tests.steps.helpers import run_step

TEMPLATE = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randint(0, 2, (32,))), batch_size=4)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        seen, hits, loss_sum = 0, 0, 0
        for x, y in loader:
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * x.size(0)
            hits += out.argmax(1).eq(y).sum().item()
            seen += x.size(0)
        print(PRINTED)


if __name__ == "__main__":
    main()
"""

CPU = epoch_figures_on(None)


def script(printed: str) -> str:
    return TEMPLATE.replace("PRINTED", printed)


def test_sums_divided_by_other_sums_are_summed_and_counts_stay_ints() -> None:
    result = run_step(CPU, script('f"loss {loss_sum / seen} acc {hits / seen}"'))
    assert (
        "        figures = torch.tensor([loss_sum, hits, seen], dtype=torch.float64)\n"
        "        dist.all_reduce(figures)\n"
        "        loss_sum = figures[0].item()\n"  # started from the int 0, but loss.item() is a float
        "        hits = int(figures[1].item())\n"
        "        seen = int(figures[2].item())\n"
        "        print(" in result.text
    )
    assert result.codes == [("MIG007", 12)]
    assert "`loss_sum`, `hits`, `seen` summed over every rank" in result.findings[0].message


def test_a_sum_divided_by_this_ranks_batches_is_averaged_and_the_others_summed() -> None:
    result = run_step(CPU, script('"loss", loss_sum / len(loader), "acc", hits / len(loader.dataset)'))
    assert "        loss_sum = figures[0].item() / dist.get_world_size()  # the ranks' mean" in result.text
    assert "        hits = int(figures[1].item())\n" in result.text
    assert "`hits` summed and `loss_sum` averaged" in result.findings[0].message


@pytest.mark.parametrize("printed", [
    '"loss", loss_sum / 7',  # a divisor it cannot place
    '"loss", loss_sum / len(loader), loss_sum / seen',  # one sum divided both ways
])
def test_a_sum_it_cannot_place_leaves_the_loop_alone(printed: str) -> None:
    result = run_step(CPU, script(printed))
    assert result.text == result.source and result.codes == []


def test_the_tensor_takes_a_free_name_and_the_targets_device() -> None:
    source = script('"acc", hits / seen').replace("    model = nn.Linear", "    figures = 3\n    model = nn.Linear")
    result = run_step(epoch_figures_on(CURRENT_GPU_OR_CPU), source, target="deepspeed")
    assert ('figures_ = torch.tensor([hits, seen], dtype=torch.float64, '
            'device="cuda" if torch.cuda.is_available() else "cpu")\n') in result.text
    assert "dist.all_reduce(figures_)\n" in result.text


def test_a_count_started_from_a_float_stays_a_float() -> None:
    source = script('"acc", hits / seen').replace("seen, hits, loss_sum = 0, 0, 0", "seen, hits, loss_sum = 0.0, 0, 0")
    text = run_step(CPU, source).text
    assert "        hits = int(figures[0].item())\n        seen = figures[1].item()\n" in text
