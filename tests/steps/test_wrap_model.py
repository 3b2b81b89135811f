"""wrap_models: each trained model is wrapped once, after it is built and before training; an
nn.DataParallel is replaced in place; later uses the wrapper does not answer go through
`.module`, and a custom method called in training is reported (it bypasses gradient sync)."""

from __future__ import annotations

from migrate.steps.wrap_model import wrap_models
from tests.steps.helpers import run_step

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(model.weight)
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
"""

CUSTOM_METHOD = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)

    def penalty(self):
        return self.fc.weight.pow(2).sum()


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = Net()
    model = nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y) + model.module.penalty()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

NO_MODEL = """\
import torch

weights = torch.zeros(4, requires_grad=True)
optimizer = torch.optim.SGD([weights], lr=0.1)
for step in range(100):
    loss = (torch.randn(8, 4) @ weights).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_the_model_is_wrapped_before_training_and_its_own_attributes_go_through_module() -> None:
    result = run_step(wrap_models, SCRIPT)
    assert result.removed == ["    print(model.weight)", '    torch.save(model.state_dict(), "model.pt")']
    assert result.added == [
        "    model = DDP(model)",
        "    print(model.module.weight)",
        '    torch.save(model.module.state_dict(), "model.pt")',
    ]
    # after everything that prepares the model (its optimizer, train()), right before training
    assert "    model.train()\n    model = DDP(model)\n    for x, y in loader:\n" in result.text
    assert result.imports == ["from torch.nn.parallel import DistributedDataParallel as DDP"]
    assert result.findings == ()


def test_calls_the_wrapper_answers_itself_are_left_as_they_are() -> None:
    """`model.parameters()`, `model.train()` and the forward `model(x)` need no `.module`."""
    result = run_step(wrap_models, SCRIPT)
    for line in ("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", "model.train()",
                 "loss = nn.functional.mse_loss(model(x), y)"):
        assert f"    {line}\n" in result.text
        assert not any(line in added for added in result.added)


def test_data_parallel_is_replaced_in_place_and_reported() -> None:
    result = run_step(wrap_models, CUSTOM_METHOD)
    assert result.removed == ["    model = nn.DataParallel(model)"]
    assert result.added == ["    model = DDP(model)"]
    assert result.codes == [("MIG003", 21)]


def test_a_custom_method_called_in_training_is_reported() -> None:
    script = CUSTOM_METHOD.replace("    model = nn.DataParallel(model)\n", "").replace("model.module.penalty()", "model.penalty()")
    result = run_step(wrap_models, script)
    assert result.removed == ["        loss = nn.functional.mse_loss(model(x), y) + model.penalty()"]
    assert result.added == [
        "    model = DDP(model)",
        "        loss = nn.functional.mse_loss(model(x), y) + model.module.penalty()",
    ]
    assert result.codes == [("MIG105", 23)]


def test_a_script_without_a_model_is_refused() -> None:
    result = run_step(wrap_models, NO_MODEL)
    assert result.refused
    assert result.text == result.source
    assert result.codes == [("MIG104", 8)]
