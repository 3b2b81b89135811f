"""A gradient penalty (`torch.autograd.grad(..., create_graph=True)` through the critic) under FSDP2:
the second backward needs the weights FSDP2 frees after the first (measured, torch 2.13: a
RuntimeError on one rank already), so the conversion leaves the file unchanged (MIG310); DDP takes
the shape. Found reading a corpus project (a GAIL discriminator) as a reviewer."""

from __future__ import annotations

from migrate import migrate_source

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
