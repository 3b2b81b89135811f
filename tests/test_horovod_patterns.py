"""to-horovod on shapes a reviewer found in real scripts: a GAN whose updates are functions (the
generator's backward reaches the discriminator's optimizer, stepped in the other function), a
backward in a helper whose caller steps, an optimizer built before its model is moved or cast.
Conversion only, except the one `full` test that runs a converted GAN under horovodrun."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate import migrate_source

GAN_FUNCTIONS = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
gen = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
critic = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
opt_gen = torch.optim.SGD(gen.parameters(), lr=0.05)
opt_critic = torch.optim.SGD(critic.parameters(), lr=0.05)


def update_critic(real):
    fake = gen(torch.randn(real.size(0), 3))
    loss = critic(fake.detach()).mean() - critic(real).mean()
    opt_critic.zero_grad()
    loss.backward()
    opt_critic.step()


def update_gen(size):
    loss = -critic(gen(torch.randn(size, 3))).mean()
    gen.zero_grad()
    loss.backward()
    opt_gen.step()


for step in range(6):
    real = torch.randn(8, 2) + 1.0
    update_critic(real)
    update_gen(8)
finish(gen, critic)
"""

GAN_LOCALS = """\
import torch
import torch.nn as nn


def update_critic(critic, opt_critic, real, fake):
    loss = critic(fake.detach()).mean() - critic(real).mean()
    opt_critic.zero_grad()
    loss.backward()
    opt_critic.step()


def update_gen(gen, critic, opt_gen, fake):
    loss = -critic(fake).mean()
    opt_gen.zero_grad()
    loss.backward()
    opt_gen.step()


def main():
    gen, critic = nn.Linear(3, 2), nn.Linear(2, 1)
    opt_gen = torch.optim.SGD(gen.parameters(), lr=0.05)
    opt_critic = torch.optim.SGD(critic.parameters(), lr=0.05)
    for step in range(6):
        fake = gen(torch.randn(8, 3))
        update_critic(critic, opt_critic, torch.randn(8, 2), fake)
        update_gen(gen, critic, opt_gen, fake)


if __name__ == "__main__":
    main()
"""


def convert(source: str):  # type: ignore[no-untyped-def]
    result = migrate_source(source, "horovod", path="train.py")
    assert not result.error, result.error
    return result


def stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_a_generator_function_synchronizes_the_critics_optimizer_it_reaches() -> None:
    result = convert(GAN_FUNCTIONS.replace("finish(gen, critic)\n", ""))
    lines = stripped_lines(result.new)
    backwards = [i for i, line in enumerate(lines) if line == "loss.backward()"]
    assert len(backwards) == 2
    assert lines[backwards[0] + 1] == "opt_critic.step()"  # the critic's own backward: no synchronize
    assert lines[backwards[1] + 1].startswith("opt_critic.synchronize()  # this backward reached critic")
    assert sum(line.startswith(("opt_critic.synchronize()", "opt_gen.synchronize()")) for line in lines) == 1
    assert [f.code for f in result.findings].count("MIG404") == 1


def test_an_optimizer_the_backwards_function_cannot_reach_is_refused_naming_both_functions() -> None:
    result = convert(GAN_LOCALS)
    assert result.skipped and result.new == GAN_LOCALS
    refusal = [f for f in result.findings if f.code == "MIG403"]
    assert len(refusal) == 1 and refusal[0].line == 15
    assert "`update_gen`" in refusal[0].message and "`update_critic`" in refusal[0].message
    assert "`opt_critic`" in refusal[0].message and "left unchanged" in refusal[0].message


def test_an_optimizer_the_generator_function_is_handed_is_synchronized_by_its_parameter_name() -> None:
    source = (GAN_LOCALS.replace("def update_gen(gen, critic, opt_gen, fake):", "def update_gen(gen, critic, opt_gen, fake, d_opt):")
              .replace("update_gen(gen, critic, opt_gen, fake)", "update_gen(gen, critic, opt_gen, fake, opt_critic)"))
    result = convert(source)
    lines = stripped_lines(result.new)
    after = lines[[i for i, line in enumerate(lines) if line == "loss.backward()"][1] + 1]
    assert after.startswith("d_opt.synchronize()  # this backward reached critic")
    assert [f.code for f in result.findings].count("MIG404") == 1


def test_a_generator_method_synchronizes_the_critics_optimizer_as_the_class_spells_it() -> None:
    source = """\
import torch
import torch.nn as nn


class Trainer:
    def __init__(self):
        self.gen = nn.Linear(3, 2)
        self.critic = nn.Linear(2, 1)
        self.opt_gen = torch.optim.SGD(self.gen.parameters(), lr=0.05)
        self.opt_critic = torch.optim.SGD(self.critic.parameters(), lr=0.05)

    def update_critic(self, real):
        loss = self.critic(self.gen(torch.randn(8, 3)).detach()).mean() - self.critic(real).mean()
        self.opt_critic.zero_grad()
        loss.backward()
        self.opt_critic.step()

    def update_gen(self):
        loss = -self.critic(self.gen(torch.randn(8, 3))).mean()
        self.opt_gen.zero_grad()
        loss.backward()
        self.opt_gen.step()

    def fit(self):
        for step in range(6):
            self.update_critic(torch.randn(8, 2))
            self.update_gen()


def main():
    Trainer().fit()


if __name__ == "__main__":
    main()
"""
    lines = stripped_lines(convert(source).new)
    after = lines[[i for i, line in enumerate(lines) if line == "loss.backward()"][1] + 1]
    assert after.startswith("self.opt_critic.synchronize()  # this backward reached self.critic")


def test_a_backward_in_a_helper_whose_every_caller_steps_right_after_needs_no_synchronize() -> None:
    source = """\
import torch
import torch.nn as nn


def backward_of(net, x):
    net(x).pow(2).mean().backward()


def main():
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        optimizer.zero_grad()
        backward_of(model, torch.randn(8, 4))
        optimizer.step()


if __name__ == "__main__":
    main()
"""
    result = convert(source)
    assert "hvd.DistributedOptimizer(" in result.new and ".synchronize()" not in result.new


def test_a_method_on_a_detached_output_does_not_reach_the_generator() -> None:
    """`D(fake.detach()).mean()`: the attribute of a call reads what the call reads, no more."""
    source = """\
import torch
import torch.nn as nn


def main():
    G, D = nn.Linear(3, 2), nn.Linear(2, 1)
    opt_g = torch.optim.SGD(G.parameters(), lr=0.05)
    opt_d = torch.optim.SGD(D.parameters(), lr=0.05)
    for step in range(6):
        fake = G(torch.randn(8, 3))
        loss_d = D(fake.detach()).mean() - D(torch.randn(8, 2)).mean()
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = -D(fake).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()


if __name__ == "__main__":
    main()
"""
    lines = stripped_lines(convert(source).new)
    assert lines[lines.index("loss_d.backward()") + 1] == "opt_d.step()"
    assert lines[lines.index("loss_g.backward()") + 1].startswith("opt_d.synchronize()")


MOVED_LATER = """\
import argparse

import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    model = nn.Linear(4, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.double()
    if args.cuda:
        model.cuda()
    for step in range(5):
        optimizer.zero_grad()
        loss = model(torch.randn(8, 4, dtype=torch.double)).pow(2).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

WRAP = "optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())"


def test_the_optimizer_is_wrapped_after_the_model_is_last_cast_or_moved() -> None:
    result = convert(MOVED_LATER)
    lines = stripped_lines(result.new)
    assert lines.index(WRAP) == lines.index("model.to(device)") + 1
    assert lines.index("hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights") > lines.index(WRAP)
    note = next(f for f in result.findings if f.code == "MIG401")
    assert "after line 14, where its model is last moved or cast" in note.message


def test_a_use_of_the_optimizer_before_the_move_keeps_the_wrap_where_it_is_built() -> None:
    """A scheduler built on the optimizer must hold the wrapped one: the wrap stays before it."""
    source = MOVED_LATER.replace("    model.double()\n",
                                 "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)\n    model.double()\n")
    lines = stripped_lines(convert(source).new)
    assert lines.index(WRAP) == lines.index("optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)") + 1


FINISH = '''\
import os

import torch


def finish(*models):
    """Every rank writes what it ends with (a module the conversion does not touch)."""
    state = {f"{i}.{k}": v for i, m in enumerate(models) for k, v in m.state_dict().items()}
    torch.save(state, f"weights_{os.environ.get('HOROVOD_RANK', '0')}.pt")
'''


@pytest.mark.slow
@pytest.mark.full  # one 2-rank horovodrun (~10 s); the conversion tests above pin the placement
def test_the_converted_gan_of_functions_trains_under_horovodrun_with_equal_ranks(tmp_path: Path) -> None:
    """Without `synchronize()` after the generator's backward, the critic's next backward stops
    the run ("Gradients were computed more than backward_passes_per_step times")."""
    import torch

    from tests.equivalence.harness import assert_same_weights, launch_horovod

    result = migrate_source("from probe_finish import finish\n" + GAN_FUNCTIONS, "horovod", path=str(tmp_path / "gan.py"))
    assert "opt_critic.synchronize()" in result.new
    (tmp_path / "probe_finish.py").write_text(FINISH)
    (tmp_path / "gan.py").write_text(result.new)
    for artifact in result.artifacts:
        (tmp_path / Path(artifact.path).name).write_text(artifact.text)
    process = launch_horovod(tmp_path / "gan.py", 2, [])
    assert process.returncode == 0, (process.stdout + process.stderr)[-4000:]
    ranks = [torch.load(tmp_path / f"weights_{r}.pt") for r in (0, 1)]
    assert_same_weights(ranks[1], ranks[0])


def test_a_critic_frozen_before_the_generator_backward_is_not_synchronized_after_it() -> None:
    """`for p in critic.parameters(): p.requires_grad = False` before the generator's backward: that
    backward gives the critic no gradient and starts no all-reduce of its own, so no
    `opt_c.synchronize()` follows it (MIG404 would be false)."""
    source = (Path(__file__).parent / "cases" / "discriminator_toggled" / "input.py").read_text()
    result = migrate_source(source, "horovod", path="gan.py")
    assert "opt_c.synchronize()" not in result.new
    assert not [f for f in result.findings if f.code == "MIG404"]
    unfrozen = source.replace("                p.requires_grad = False\n", "                p.requires_grad = True\n")
    again = migrate_source(unfrozen, "horovod", path="gan.py")
    assert "            generator_loss.backward()\n            opt_c.synchronize()" in again.new
