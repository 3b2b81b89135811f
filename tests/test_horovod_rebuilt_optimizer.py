"""to-horovod on an optimizer built again during training (steps/horovod_rebuilt.py): the replaced
optimizer is retired (`set_backward_passes_per_step(sys.maxsize)`, since Horovod cannot take its
hooks off), a torch optimizer built on the rebinding line is wrapped as the first one was, and a
shape it cannot follow leaves the file unchanged (MIG402). Conversion only."""

from __future__ import annotations

from migrate import HorovodOptions, migrate_source

RETIRE = "set_backward_passes_per_step(sys.maxsize)"

METHOD_WITH_ACCUMULATION = """\
import torch
import torch.nn as nn


class Learner:
    def __init__(self, net):
        self.net = net
        self.optim = torch.optim.AdamW(self.net.parameters(), lr=0.01)

    def restart(self):
        self.optim = torch.optim.AdamW(self.net.parameters(), lr=0.001)

    def train(self, batches, epochs):
        for epoch in range(epochs):
            for i, (x, y) in enumerate(batches):
                loss = nn.functional.mse_loss(self.net(x), y) / 4
                loss.backward()
                if (i + 1) % 4 == 0:
                    self.optim.step()
                    self.optim.zero_grad()
            if epoch == 2:
                self.restart()


if __name__ == "__main__":
    Learner(nn.Linear(3, 1)).train([(torch.randn(4, 3), torch.randn(4, 1))] * 8, 5)
"""


def convert(code: str) -> tuple[str, list[tuple[int, str]]]:
    result = migrate_source(code, "horovod", HorovodOptions(scale_lr=False))
    return result.new, [(f.line, f.code) for f in result.findings]


def lines_of(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines()]


def test_a_method_rebinding_is_retired_then_wrapped_like_the_first() -> None:
    new, findings = convert(METHOD_WITH_ACCUMULATION)
    wrap = ("self.optim = hvd.DistributedOptimizer(self.optim, named_parameters=self.net.named_parameters(), "
            "backward_passes_per_step=4)")
    lines = lines_of(new)
    restart = lines.index("def restart(self):")
    assert lines[restart + 1].startswith(f"self.optim.{RETIRE}  #")
    assert lines[restart + 2] == "self.optim = torch.optim.AdamW(self.net.parameters(), lr=0.001)"
    assert lines[restart + 3] == wrap
    assert lines.count(wrap) == 2  # the first construction's wrap, in __init__, says the same
    assert "import sys" in lines
    assert (11, "MIG401") in findings


REBUILT_BY_FUNCTION = """\
import torch
import torch.nn as nn


def fresh(model, lr):
    return torch.optim.RMSprop(model.parameters(), lr=lr)


model = nn.Linear(4, 2)
opt = fresh(model, 0.01)
for epoch in range(4):
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(5, 4)).sum().backward()
        opt.step()
    opt = fresh(model, 0.01 / (epoch + 2))
"""


def test_a_call_of_the_wrapping_function_in_the_loop_retires_the_one_it_replaces() -> None:
    new, findings = convert(REBUILT_BY_FUNCTION)
    lines = lines_of(new)
    assert "return hvd.DistributedOptimizer(torch.optim.RMSprop(model.parameters(), lr=lr), " \
        "named_parameters=model.named_parameters())" in lines
    again = lines.index("opt = fresh(model, 0.01 / (epoch + 2))")
    assert lines[again - 1].startswith(f"opt.{RETIRE}  #")
    assert sum(RETIRE in line for line in lines) == 1  # not before the first binding
    assert (16, "MIG401") in findings


def test_a_function_called_once_needs_no_retirement() -> None:
    once = REBUILT_BY_FUNCTION.replace("    opt = fresh(model, 0.01 / (epoch + 2))\n", "")
    new, _ = convert(once)
    assert "hvd.DistributedOptimizer(" in new
    assert RETIRE not in new and "import sys" not in new


def test_a_literal_rebinding_is_no_rebuild() -> None:
    closing = METHOD_WITH_ACCUMULATION.replace("self.optim = torch.optim.AdamW(self.net.parameters(), lr=0.001)",
                                               "self.optim = None")
    new, findings = convert(closing)
    assert RETIRE not in new and "MIG402" not in {code for _, code in findings}


def refused(code: str, line: int) -> None:
    result = migrate_source(code, "horovod", HorovodOptions(scale_lr=False))
    assert result.new == result.old
    messages = [f for f in result.findings if f.code == "MIG402"]
    assert [f.line for f in messages] == [line], result.findings
    assert "is built again during training (line" in messages[0].message


def test_a_rebinding_through_a_local_name_is_refused() -> None:
    refused(METHOD_WITH_ACCUMULATION.replace(
        "        self.optim = torch.optim.AdamW(self.net.parameters(), lr=0.001)\n",
        "        smaller = torch.optim.AdamW(self.net.parameters(), lr=0.001)\n        self.optim = smaller\n"), 12)


def test_a_rebuilding_method_that_init_also_calls_is_refused() -> None:
    refused(METHOD_WITH_ACCUMULATION.replace(
        "        self.optim = torch.optim.AdamW(self.net.parameters(), lr=0.01)\n",
        "        self.optim = torch.optim.AdamW(self.net.parameters(), lr=0.01)\n        self.restart()\n"), 12)


def test_a_call_in_the_loop_with_nothing_bound_before_is_refused() -> None:
    refused(REBUILT_BY_FUNCTION.replace("opt = fresh(model, 0.01)\n", "opt = None\n").replace(
        "    for _ in range(3):", "    if epoch % 2 == 0:\n        opt = fresh(model, 0.01)\n    for _ in range(3):"), 13)
