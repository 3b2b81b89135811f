"""wrap_models on a script that had nn.DataParallel: a load the script made into its DataParallel
(keys `module.x`, as its own checkpoints have them) now runs before the wrap, into the module
itself, so it takes `module.` off the keys; loads of plain keys are left as they are."""

from __future__ import annotations

import pytest

from migrate.steps.wrap_model import wrap_models
from tests.steps.helpers import run_step

SCRIPT = """\
import torch
import torch.nn as nn


def main(resume):
    model = nn.Linear(4, 1)
{before}    model = nn.DataParallel(model)
{after}    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main("model.pt")
"""

STRIPPED = '{key.removeprefix("module."): value for key, value in '


@pytest.mark.parametrize("target", ["ddp", "horovod"])
def test_a_load_into_the_data_parallel_takes_the_prefix_off(target: str) -> None:
    code = SCRIPT.format(before="", after="    if resume:\n        model.load_state_dict(torch.load(resume), strict=True)\n")
    result = run_step(wrap_models, code, target)
    assert f"model.load_state_dict({STRIPPED}torch.load(resume).items()}}, strict=True)" in [line.strip() for line in result.added]
    assert ("the load on line 9 now runs before the wrap" if target == "ddp"
            else "the load on line 9 now loads into the module itself") in result.findings[0].message


def test_a_load_of_a_state_dict_by_name_takes_the_prefix_off_too() -> None:
    code = SCRIPT.format(before="", after="    state = torch.load(resume)\n    model.load_state_dict(state['model'])\n")
    result = run_step(wrap_models, code)
    assert f"model.load_state_dict({STRIPPED}state['model'].items()}})" in [line.strip() for line in result.added]


@pytest.mark.parametrize(("before", "after"), [
    ("    model.load_state_dict(torch.load(resume))\n", ""),  # before the DataParallel: plain keys
    ("", "    model.module.load_state_dict(torch.load(resume))\n"),  # into the module inside it: plain keys
])
def test_loads_of_plain_keys_are_left_alone(before: str, after: str) -> None:
    result = run_step(wrap_models, SCRIPT.format(before=before, after=after))
    assert not any("removeprefix" in line for line in result.added)
    assert "now runs before the wrap" not in result.findings[0].message
