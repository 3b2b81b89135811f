"""ddp_models: where DDP wraps each model and with which options. DDP takes the parameters as
they are when it is built (device, dtype, which require a gradient) and waits in every step for
a gradient of each one: the wrap follows a cast after torch.compile, refuses what it cannot
follow (MIG502), skips a model with nothing to train (MIG104 when none is left), and looks for
unused parameters where some may get no gradient in a step (MIG501)."""

from __future__ import annotations

import textwrap

import pytest

from migrate.steps.ddp_models import ddp_models
from migrate.steps.wrap_model import wrap_models
from tests.steps.helpers import StepResult, run_steps

NET = """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        return self.out(torch.relu(self.body(x)))
"""

SCRIPT = """\
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


{classes}

def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
{setup}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
{epoch}
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
{after}

if __name__ == "__main__":
    main()
"""


def convert(setup: str, classes: str = NET, epoch: str = "pass", after: str = "") -> StepResult:
    code = SCRIPT.format(classes=classes, setup=textwrap.indent(textwrap.dedent(setup).strip("\n"), "    "),
                         epoch=textwrap.indent(textwrap.dedent(epoch), "        "),
                         after=textwrap.indent(textwrap.dedent(after), "    "))
    return run_steps([ddp_models, wrap_models], code)


def line_of(result: StepResult, text: str) -> int:
    """The 1-based line of the script's first line that holds `text`."""
    return next(i for i, line in enumerate(result.source.splitlines(), 1) if text in line)


def added(result: StepResult) -> list[str]:
    return [line.strip() for line in result.added]


def lines_around_wrap(result: StepResult) -> list[str]:
    """The model's setup lines of the converted main(), the wrap among them."""
    lines = [line.strip() for line in result.text.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("loader = "))
    end = next(i for i, line in enumerate(lines) if line.startswith("optimizer = "))
    return lines[start + 1 : end]


# -- where the wrap goes --------------------------------------------------------------------------


def test_a_cast_after_the_compile_takes_the_wrap_after_it() -> None:
    result = convert("""\
        model = Net()
        model = torch.compile(model)
        model.to(device).to(torch.bfloat16)
    """)
    assert lines_around_wrap(result) == ["model = Net()", "model = torch.compile(model)",
                                         "model.to(device).to(torch.bfloat16)", "model = DDP(model)"]
    assert result.findings == ()


@pytest.mark.parametrize("change", ["model.half()", "model.cuda()", "model.type(torch.float64)", "model = model.double()",
                                    "model.body.requires_grad_(False)", "model.out = nn.Linear(4, 1)",
                                    "model.apply(lambda m: None)"])
def test_every_change_of_the_parameters_after_the_compile_moves_the_wrap(change: str) -> None:
    result = convert(f"model = Net()\nmodel = torch.compile(model)\n{change}\n")
    assert lines_around_wrap(result)[-2:] == [change, "model = DDP(model)"]


def test_a_cast_chained_on_the_compile_wraps_after_that_line() -> None:
    result = convert("model = Net()\nmodel = torch.compile(model).to(device)\n")
    assert lines_around_wrap(result) == ["model = Net()", "model = torch.compile(model).to(device)", "model = DDP(model)"]


def test_without_a_change_after_the_compile_the_wrap_stays_before_it() -> None:
    result = convert("model = Net().to(device)\nmodel = torch.compile(model)\nmodel.train()\n")
    assert lines_around_wrap(result) == ["model = Net().to(device)", "model = DDP(model)", "model = torch.compile(model)",
                                         "model.train()"]


@pytest.mark.parametrize("cast", ["model.double()", "model.type(torch.float64)", "model.cpu()"])
def test_every_cast_before_training_comes_before_the_wrap(cast: str) -> None:
    result = convert(f"model = Net()\n{cast}\n")
    assert lines_around_wrap(result) == ["model = Net()", cast, "model = DDP(model)"]


def test_a_part_frozen_by_its_own_call_is_frozen_before_the_wrap() -> None:
    result = convert("model = Net()\nmodel.body.requires_grad_(False)\n")
    assert lines_around_wrap(result) == ["model = Net()", "model.body.requires_grad_(False)", "model = DDP(model)"]
    assert result.findings == ()


# -- what cannot be reordered (MIG502) -----------------------------------------------------------------


def test_a_cast_after_the_model_already_ran_takes_the_wrap_after_it() -> None:
    result = convert("""\
        model = Net()
        model = torch.compile(model)
        print(model(torch.zeros(1, 4)))
        model.half()
    """)
    assert lines_around_wrap(result) == ["model = Net()", "model = torch.compile(model)", "print(model(torch.zeros(1, 4)))",
                                         "model.half()", "model = DDP(model)"]


def test_a_move_under_a_condition_after_a_print_takes_the_wrap_after_the_condition() -> None:
    result = convert("""\
        model = Net()
        print(model)
        if torch.cuda.is_available():
            model.cuda()
    """)
    assert lines_around_wrap(result)[-1] == "model = DDP(model)" and lines_around_wrap(result)[-2] == "model.cuda()"


def test_a_cast_inside_the_training_loop_is_refused() -> None:
    result = convert("model = Net()", epoch="if epoch == 2:\n    model.half()")
    assert result.refused and result.codes == [("MIG502", line_of(result, "model.half()"))]
    loop = line_of(result, "for epoch in")
    assert f"line {line_of(result, 'model.half()')} (`model.half()`) casts or moves `model` inside the training code that starts at line {loop}" \
        in result.findings[0].message


def test_a_move_after_training_is_left_alone() -> None:
    result = convert("model = Net()", after='torch.save(model.to("cpu"), "model.pt")')
    assert not result.refused and "model = DDP(model)" in added(result)


@pytest.mark.parametrize("switch", ["model.body.requires_grad_(True)", "model.body.requires_grad_()",
                                    "for p in model.parameters():\n    p.requires_grad = epoch > 0"])
def test_gradients_switched_on_during_training_are_refused(switch: str) -> None:
    result = convert("model = Net()\nmodel.body.requires_grad_(False)", epoch=f"if epoch == 1:\n{textwrap.indent(switch, '    ')}")
    assert result.refused and [code for code, _line in result.codes] == ["MIG502"]
    assert "trainable again during training" in result.findings[0].message


def test_gradients_switched_on_for_a_part_frozen_under_another_name_are_refused() -> None:
    result = convert("model = Net()\nbody = model.body\nbody.requires_grad_(False)",
                     epoch="if epoch == 1:\n    model.body.requires_grad_(True)")
    assert result.refused and [code for code, _line in result.codes] == ["MIG502"]


SET_TRAINABLE = "\n\ndef set_trainable(module, flag):\n    for p in module.parameters():\n        p.requires_grad = flag\n"


def test_the_whole_model_switched_off_and_on_during_training_keeps_the_plain_wrap() -> None:
    """A GAN's critic, frozen for the generator's step and trainable again for its own: every
    parameter required a gradient when DDP was built, so DDP averages them all, and a step that
    gives the module no gradient at all leaves DDP nothing to wait for (measured: two ranks train)."""
    result = convert("model = Net()", classes=NET + SET_TRAINABLE, epoch="set_trainable(model, epoch % 2 == 0)")
    assert "model = DDP(model)" in added(result) and result.findings == ()


def test_a_part_switched_off_by_a_helper_during_training_gets_find_unused_parameters() -> None:
    result = convert("model = Net()", classes=NET + SET_TRAINABLE, epoch="set_trainable(model.body, epoch < 2)")
    assert "model = DDP(model, find_unused_parameters=True)" in added(result)
    assert "`model.body` has its gradients switched off during training" in result.findings[0].message


# -- nothing to train --------------------------------------------------------------------------------


@pytest.mark.parametrize("setup", ["model = Net()\nmodel.requires_grad_(False)",
                                   "model = Net().requires_grad_(False)",
                                   "model = Net()\nfor p in model.parameters():\n    p.requires_grad = False"])
def test_a_model_frozen_whole_is_not_wrapped_and_alone_it_is_refused(setup: str) -> None:
    result = convert(setup)
    assert result.refused and [code for code, _line in result.codes] == ["MIG104"]
    assert "every parameter of `model` is frozen" in result.findings[0].message


def test_a_model_frozen_whole_then_given_a_new_head_is_wrapped() -> None:
    result = convert("model = Net()\nmodel.requires_grad_(False)\nmodel.out = nn.Linear(4, 1)")
    assert not result.refused and "model = DDP(model)" in added(result)


# -- parameters that may get no gradient (MIG501) ---------------------------------------------------


def with_forward(init: str, forward: str, signature: str = "self, x") -> str:
    """A Net whose __init__ builds `init` and whose forward runs `forward`."""
    return (f"class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"{textwrap.indent(textwrap.dedent(init), ' ' * 8)}\n    def forward({signature}):\n"
            f"{textwrap.indent(textwrap.dedent(forward), ' ' * 8)}\n")


GAPS = {
    "no_grad": (with_forward("self.body = nn.Linear(4, 4)\nself.out = nn.Linear(4, 1)",
                             "with torch.no_grad():\n    h = self.body(x)\nreturn self.out(h)"),
                "`model.body` runs only under `torch.no_grad()` in `Net.forward()`"),
    "detached": (with_forward("self.body = nn.Linear(4, 4)\nself.out = nn.Linear(4, 1)",
                              "return self.out(self.body(x).detach() + x)"),
                 "`model.body` is only used detached (`.detach()`) in `Net.forward()`"),
    "argument": (with_forward("self.extra = nn.Linear(4, 1)\nself.out = nn.Linear(4, 1)",
                              "y = self.out(x)\nif extra:\n    y = y + self.extra(x)\nreturn y", "self, x, extra=False"),
                 "`model.extra` runs only when `extra` is true in `Net.forward()`"),
    "not_training": (with_forward("self.calibrate = nn.Linear(1, 1)\nself.out = nn.Linear(4, 1)",
                                  "y = self.out(x)\nreturn y if self.training else self.calibrate(y)"),
                     "`model.calibrate` runs only when the model is not training in `Net.forward()`"),
    "random": (with_forward("self.body = nn.Linear(4, 4)\nself.out = nn.Linear(4, 1)",
                            "if random.random() < 0.5:\n    x = self.body(x)\nreturn self.out(x)"),
               "`model.body` runs only when `random.random() < 0.5` is true in `Net.forward()`"),
    "unused": (with_forward("self.spare = nn.Linear(4, 4)\nself.out = nn.Linear(4, 1)", "return self.out(x)"),
               "`model.spare` is never used by `Net.forward()`"),
    "inner_class": ("class Inner(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.gate = nn.Linear(4, 4)\n\n    def forward(self, x, gated=False):\n"
                    "        return self.gate(x) if gated else x\n\n\n"
                    + with_forward("self.inner = Inner()\nself.out = nn.Linear(4, 1)", "return self.out(self.inner(x))"),
                    "`model.inner.gate` runs only when `gated` is true in `Inner.forward()`"),
}


@pytest.mark.parametrize("kind", sorted(GAPS))
def test_parameters_without_gradient_get_find_unused_parameters(kind: str) -> None:
    classes, said = GAPS[kind]
    result = convert("model = Net()", classes=classes)
    assert "model = DDP(model, find_unused_parameters=True)" in added(result)
    assert [code for code, _line in result.codes] == ["MIG501"]
    assert said in result.findings[0].message
    assert "extra traversal of the autograd graph each step" in result.findings[0].message


def test_gradients_switched_off_during_training_get_find_unused_parameters() -> None:
    result = convert("model = Net()", epoch="if epoch == 2:\n    model.body.requires_grad_(False)")
    assert "model = DDP(model, find_unused_parameters=True)" in added(result)
    assert "`model.body` has its gradients switched off during training" in result.findings[0].message


NO_GAPS = {
    "fixed_condition": with_forward("self.down = nn.Linear(4, 4) if True else None\nself.out = nn.Linear(4, 1)",
                                    "if self.down is not None:\n    x = self.down(x)\nreturn self.out(x)"),
    "device_test": with_forward("self.out = nn.Linear(4, 1)",
                                "if x.is_cuda:\n    return self.out(x)\nreturn self.out(x)"),
    "training_branch": with_forward("self.noise = nn.Linear(4, 4)\nself.out = nn.Linear(4, 1)",
                                    "if self.training:\n    x = self.noise(x)\nreturn self.out(x)"),
    "walks_children": with_forward("self.a = nn.Linear(4, 4)\nself.b = nn.Linear(4, 1)",
                                   "for layer in self.children():\n    x = layer(x)\nreturn x"),
    "frozen_in_class": with_forward("self.body = nn.Linear(4, 4)\nself.body.requires_grad_(False)\nself.out = nn.Linear(4, 1)",
                                    "with torch.no_grad():\n    x = self.body(x)\nreturn self.out(x)"),
    "parameter_free": with_forward("self.act = nn.ReLU()\nself.drop = nn.Dropout(0.1)\nself.out = nn.Linear(4, 1)",
                                   "return self.out(x)"),
    "used_once_with_gradient": with_forward("self.body = nn.Linear(4, 4)\nself.out = nn.Linear(4, 1)",
                                            "with torch.no_grad():\n    target = self.body(x)\nreturn self.out(self.body(x) - target)"),
}


@pytest.mark.parametrize("kind", sorted(NO_GAPS))
def test_parameters_that_always_get_a_gradient_keep_the_plain_wrap(kind: str) -> None:
    result = convert("model = Net()", classes=NO_GAPS[kind])
    assert "model = DDP(model)" in added(result) and result.findings == ()


def test_a_part_frozen_before_the_wrap_is_no_gap() -> None:
    classes = with_forward("self.body = nn.Linear(4, 4)\nself.out = nn.Linear(4, 1)",
                           "with torch.no_grad():\n    x = self.body(x)\nreturn self.out(x)")
    result = convert("model = Net()\nfor p in model.body.parameters():\n    p.requires_grad = False", classes=classes)
    assert "model = DDP(model)" in added(result) and result.findings == ()
