"""A script that wrapped its model in nn.DataParallel and reads `model.module` inside a function
nested in the training function (a closure) or a lambda: the closure's `model` is the outer
function's, so the conversion treats its reads as it treats the outer function's own. Horovod and
fully_shard keep the user's class (`.module` goes), DDP and DeepSpeed's engine hold it as `.module`
(it stays), and the wrap keeps the place the script's DataParallel had when a `def` comes first."""

from __future__ import annotations

import re

import pytest

from migrate import migrate_source
from migrate.targets import targets

# the checkpoint helper is defined before the wrap and called after it
BEFORE_THE_WRAP = """\
import torch
import torch.nn as nn


def main():
    model = nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 1))
    data = torch.utils.data.TensorDataset(torch.randn(40, 3), torch.randn(40, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=10, shuffle=True)
    optimizer = torch.optim.SGD([{"params": model[0].parameters(), "lr": 0.05},
                                 {"params": model[1].parameters(), "lr": 0.2}])

    def keep(path):
        torch.save(model.module.state_dict(), path)

    model = nn.DataParallel(model)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.l1_loss(model(x), y).backward()
            optimizer.step()
        keep("kept.pt")


if __name__ == "__main__":
    main()
"""

# an attribute read in a helper defined after the wrap, and in a lambda
AFTER_THE_WRAP = """\
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)
        self.label = "scorer"

    def forward(self, x):
        return self.fc(x)


def main():
    model = Scorer()
    data = torch.utils.data.TensorDataset(torch.randn(40, 3), torch.randn(40, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=10, shuffle=True)
    model = nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def announce(epoch):
        print(model.module.label, epoch)

    name = lambda: model.module.label
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.l1_loss(model(x), y).backward()
            optimizer.step()
        announce(epoch)
    print(name())


if __name__ == "__main__":
    main()
"""


def lines(code: str, target: str, **options: object) -> list[str]:
    result = migrate_source(code, target, targets()[target].options_class(**options))  # type: ignore[arg-type]
    assert not [f for f in result.findings if f.severity == "error"], result.findings
    return [line.strip() for line in result.new.splitlines()]


@pytest.mark.parametrize("target", ["horovod", "fsdp"])
def test_a_closure_defined_before_the_wrap_reads_the_module_itself(target: str) -> None:
    new = lines(BEFORE_THE_WRAP, target)
    assert not [line for line in new if re.search(r"\.module\b", line)]
    assert any("model.state_dict()" in line for line in new) or any("get_model_state_dict(model" in line for line in new)


def test_ddp_keeps_the_module_of_the_closure_and_wraps_where_data_parallel_was() -> None:
    new = lines(BEFORE_THE_WRAP, "ddp")
    assert "torch.save(model.module.state_dict(), path)" in new
    # `model[0]` in the optimizer reads the Sequential: the wrap stays below it, where the script wrapped
    assert new.index("model = DDP(model)") > new.index("def keep(path):")
    assert new.index("model = DDP(model)") > next(i for i, line in enumerate(new) if "model[1].parameters()" in line)


def test_deepspeed_zero_3_gathers_the_engine_s_module_inside_the_closure() -> None:
    new = lines(BEFORE_THE_WRAP, "deepspeed", zero=3)
    closure = new[new.index("def keep(path):"):]
    assert closure[1].startswith("with deepspeed.zero.GatheredParameters(list(model.module.parameters()))")
    assert "model.module.module" not in "\n".join(new)


@pytest.mark.parametrize("target", ["horovod", "fsdp"])
def test_attributes_read_after_the_wrap_in_a_closure_and_a_lambda_lose_module(target: str) -> None:
    new = lines(AFTER_THE_WRAP, target)
    assert "print(model.label, epoch)" in new
    assert "name = lambda: model.label" in new


@pytest.mark.parametrize("target", ["ddp", "deepspeed"])
def test_attributes_read_in_a_closure_keep_module_where_the_wrapper_holds_it(target: str) -> None:
    new = lines(AFTER_THE_WRAP, target)
    assert "print(model.module.label, epoch)" in new
    assert "name = lambda: model.module.label" in new


def test_a_closure_without_data_parallel_reads_attributes_through_the_wrapper() -> None:
    plain = AFTER_THE_WRAP.replace("    model = nn.DataParallel(model)\n", "").replace("model.module.", "model.")
    new = lines(plain, "ddp")
    assert "print(model.module.label, epoch)" in new
    assert "name = lambda: model.module.label" in new


def test_a_nested_function_with_its_own_model_is_not_followed() -> None:
    own = AFTER_THE_WRAP.replace("def announce(epoch):\n        print(model.module.label, epoch)",
                                 "def announce(epoch, model=None):\n        print(model.module.label, epoch)")
    assert "print(model.module.label, epoch)" in lines(own, "horovod")
