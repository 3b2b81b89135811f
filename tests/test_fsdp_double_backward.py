"""A gradient penalty (`torch.autograd.grad(..., create_graph=True)` through the critic) under FSDP2:
the second backward needs the weights FSDP2 frees after the first (measured, torch 2.13: a
RuntimeError on one rank already), so the conversion leaves the file unchanged (MIG310); DDP takes
the shape. Found reading a corpus project (a GAIL discriminator) as a reviewer."""

from __future__ import annotations

from pathlib import Path

from migrate import migrate_source
from migrate.api import migrate_file
from migrate.records import FileResult

SCRIPT = '''import torch


def penalty(critic, inputs):
    inputs = inputs.clone().requires_grad_(True)
    scores = critic(inputs)
    grads = torch.autograd.grad(scores.sum(), inputs, create_graph=True)[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def main():
    critic = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
    for step in range(5):
        batch = torch.randn(6, 4)
        loss = critic(batch).mean() + 10 * penalty(critic, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_fsdp_refuses_a_gradient_penalty_and_says_where() -> None:
    result = migrate_source(SCRIPT, "fsdp")
    assert result.skipped and result.new == SCRIPT
    [mig310] = [f for f in result.findings if f.code == "MIG310"]
    assert (mig310.line, mig310.col) == (7, 13)
    assert mig310.message.startswith("`torch.autograd.grad(scores.sum(), inputs, create_graph=True)` takes a gradient "
                                     "of a gradient (create_graph=True)")


def test_ddp_and_a_first_order_grad_still_convert() -> None:
    assert not migrate_source(SCRIPT, "ddp").skipped
    first_order = SCRIPT.replace(", create_graph=True", "")
    assert not [f for f in migrate_source(first_order, "fsdp").findings if f.code == "MIG310"]


PENALTY = """\
import torch


def gradient_penalty(critic, x):
    x = x.clone().requires_grad_(True)
    grad = torch.autograd.grad(critic(x).sum(), x, create_graph=True)[0]
    return ((grad.norm(dim=1) - 1) ** 2).mean()
"""

GP_TRAIN = """\
import torch
import torch.nn as nn

import penalties as gp


def main():
    critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 2)), batch_size=8)
    for epoch in range(2):
        for (x,) in loader:
            loss = -critic(x).mean() + 10 * gp.gradient_penalty(critic, x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_a_penalty_in_a_package_the_program_does_not_hold_is_refused_at_its_call(tmp_path: Path) -> None:
    """`import penalties as gp` where penalties/__init__.py star-imports the function from a module
    below it (three imports from the script: the program holds two)."""
    package = tmp_path / "penalties"
    (package / "gan").mkdir(parents=True)
    (package / "__init__.py").write_text("from penalties.gan import *\n")
    (package / "gan" / "__init__.py").write_text("from penalties.gan.gradient import *\n")
    (package / "gan" / "gradient.py").write_text(PENALTY)
    (tmp_path / "train.py").write_text(GP_TRAIN)
    result = migrate_file(str(tmp_path / "train.py"), "fsdp")
    assert isinstance(result, FileResult) and result.new == GP_TRAIN
    [refusal] = [f for f in result.findings if f.code == "MIG310"]
    assert refusal.line == 13
    assert refusal.message.startswith("`gp.gradient_penalty(...)` runs `gradient_penalty()` of penalties/gan/gradient.py, "
                                      "which takes a gradient of a gradient")
