"""A rate the script writes into the optimizer's groups itself replaces the rate the optimizer was
built with, so once lr= is scaled (Horovod's default, --scale-lr elsewhere) that write is scaled
too: a linear decay `optim.param_groups[0]['lr'] = lrate * (1 - ep / n_epoch)` (a conditional
diffusion script of the corpus) undid Horovod's scaling from the first epoch while MIG004 said the
rate was scaled. A write that starts from a rate already scaled (the group's own, a scheduler's)
is left as it is. Conversion only: the step on small scripts."""

from __future__ import annotations

from migrate.steps.scale_lr import scale_lr, scale_lr_unless_declined
from tests.steps.helpers import run_step

DECAY = """\
import torch
import torch.nn as nn


def main():
    model = nn.Linear(4, 1)
    lrate, n_epoch = 1e-4, 20
    optim = torch.optim.Adam(model.parameters(), lr=lrate)
    for ep in range(n_epoch):
        optim.param_groups[0]['lr'] = lrate*(1-ep/n_epoch)
        for x in torch.randn(3, 8, 4):
            optim.zero_grad()
            model(x).sum().backward()
            optim.step()
"""

LOOP = DECAY.replace("        optim.param_groups[0]['lr'] = lrate*(1-ep/n_epoch)\n",
                     "        for group in optim.param_groups:\n"
                     "            group['lr'] = lrate if ep < 10 else lrate / 10\n")


def test_a_decay_written_into_the_first_group_is_scaled_and_named() -> None:
    result = run_step(scale_lr_unless_declined, DECAY, target="horovod")
    assert result.added == ["    optim = torch.optim.Adam(model.parameters(), lr=lrate * hvd.size())",
                            "        optim.param_groups[0]['lr'] = lrate*(1-ep/n_epoch) * hvd.size()"]
    assert result.codes == [("MIG004", 8), ("MIG004", 10)]
    assert result.findings[1].message == ("the rate the script writes into the parameter groups itself (line 10) is "
                                          "multiplied by hvd.size() too: it replaces the optimizer's scaled one")


def test_a_rate_set_in_a_loop_over_the_groups_is_scaled_whole() -> None:
    result = run_step(scale_lr_unless_declined, LOOP, target="horovod")
    assert "            group['lr'] = (lrate if ep < 10 else lrate / 10) * hvd.size()" in result.added


def test_ddp_scales_the_write_only_when_asked() -> None:
    assert run_step(scale_lr, DECAY, target="ddp").added == []
    asked = run_step(scale_lr, DECAY, target="ddp", scale_lr=True)
    assert "        optim.param_groups[0]['lr'] = lrate*(1-ep/n_epoch) * dist.get_world_size()" in asked.added


def test_a_write_that_starts_from_a_scaled_rate_is_left_as_it_is() -> None:
    for write in ("group['lr'] = group['lr'] * 0.1", "group['lr'] = scheduler.get_last_lr()[0]",
                  "group['lr'] = current * 0.5"):
        code = LOOP.replace("            group['lr'] = lrate if ep < 10 else lrate / 10\n",
                            f"            current = optim.param_groups[0]['lr']\n            {write}\n")
        result = run_step(scale_lr_unless_declined, code, target="horovod")
        assert result.added == ["    optim = torch.optim.Adam(model.parameters(), lr=lrate * hvd.size())"], write
        assert [c for c, _ in result.codes] == ["MIG004"], write
