"""refuse_unwrappable: when the module training updates cannot be wrapped (it steps its own
optimizer inside its own method), the file is refused with MIG104, which names what was seen."""

from __future__ import annotations

from migrate.steps.trained_models import refuse_unwrappable
from tests.steps.helpers import run_step

SELF_STEPPING = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.optimizer = torch.optim.SGD(self.parameters(), lr=0.1)

    def forward(self, x):
        return self.fc(x)

    def learn(self, x, y):
        loss = nn.functional.mse_loss(self(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def main():
    net = Net()
    for step in range(100):
        net.learn(torch.randn(8, 4), torch.randn(8, 1))


if __name__ == "__main__":
    main()
"""

STEPPED_BY_THE_SCRIPT = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


def main():
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(100):
        loss = nn.functional.mse_loss(net(torch.randn(8, 4)), torch.randn(8, 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_a_model_the_script_calls_and_steps_is_not_refused() -> None:
    result = run_step(refuse_unwrappable, STEPPED_BY_THE_SCRIPT)
    assert not result.refused
    assert result.text == result.source
    assert result.findings == ()


def test_a_module_that_steps_its_own_optimizer_is_refused() -> None:
    result = run_step(refuse_unwrappable, SELF_STEPPING)
    assert result.refused
    assert result.text == result.source
    assert result.codes == [("MIG104", 18)]
    message = result.findings[0].message
    assert "`self.optimizer` holds the parameters of `Net` itself (line 9)" in message
    assert "called as `net.learn(...)` (line 24)" in message
