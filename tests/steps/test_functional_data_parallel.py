"""functional_data_parallel: `nn.parallel.data_parallel(module, inputs, device_ids)` runs the module
on every GPU it lists, in each process of the launcher; it becomes a plain call of the module on
this process's device (MIG003)."""

from __future__ import annotations

from migrate.steps.functional_data_parallel import functional_data_parallel
from tests.steps.helpers import run_step

IN_FORWARD = """\
import torch
import torch.nn as nn
from torch.nn.parallel import data_parallel


class Generator(nn.Module):
    def __init__(self, ngpu):
        super().__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.pair = nn.Bilinear(4, 4, 8)

    def forward(self, x, y):
        if x.is_cuda and self.ngpu > 1:
            a = nn.parallel.data_parallel(self.main, x, range(self.ngpu))
            b = data_parallel(self.pair, (x, y), list(range(self.ngpu)), module_kwargs={})
            return a + b
        return self.main(x) + self.pair(x, y)


def main():
    model = Generator(2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        x, y = torch.randn(8, 4), torch.randn(8, 4)
        loss = model(x, y).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_each_data_parallel_call_runs_the_module_itself() -> None:
    result = run_step(functional_data_parallel, IN_FORWARD)
    assert [line.strip() for line in result.added] == ["a = self.main(x)", "b = self.pair(x, y, **{})"]
    assert result.codes == [("MIG003", 15), ("MIG003", 16)]
    assert "`nn.parallel.data_parallel(self.main, x, range(self.ngpu))` now runs `self.main(x)`" in result.findings[0].message


def test_keep_global_batch_drops_the_batch_advice() -> None:
    result = run_step(functional_data_parallel, IN_FORWARD, keep_global_batch=True)
    assert all("--keep-global-batch" not in f.message and "whole batch" not in f.message for f in result.findings)


def test_a_script_without_it_is_left_alone() -> None:
    plain = IN_FORWARD.replace("nn.parallel.data_parallel(self.main, x, range(self.ngpu))", "self.main(x)").replace(
        "data_parallel(self.pair, (x, y), list(range(self.ngpu)), module_kwargs={})", "self.pair(x, y)")
    result = run_step(functional_data_parallel, plain)
    assert result.text == result.source and result.findings == ()
