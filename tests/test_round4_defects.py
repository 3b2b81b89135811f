"""Round 4's reviewed defects, each on a small script converted in memory (no process launched):
an FSDP resume helper that names the model and optimizer its own way, an optimizer rebuilt by a
method the training loop calls (DeepSpeed), a loop freezing one indexed layer (not the model), and
a print hoisted off the rank-0 guard that keeps another step's edit inside it."""

from __future__ import annotations

from migrate import migrate_source

RESUME = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)


def restore(net, opt, path):
    saved = torch.load(path)
    net.load_state_dict(saved["weights"])
    opt.load_state_dict(saved["opt"])


def main():
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    restore(model, optimizer, "last.pt")
    for step in range(10):
        loss = model(torch.randn(5, 4)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_fsdp_resume_helper_loads_through_set_state_dict_under_its_own_names() -> None:
    new = migrate_source(RESUME, "fsdp").new
    assert 'set_model_state_dict(net, saved["weights"], options=' in new
    assert 'set_optimizer_state_dict(net, opt, named_optimizer_state(net, opt, saved["opt"]), options=' in new
    assert "net.load_state_dict" not in new and "opt.load_state_dict" not in new


REBUILT = '''
import torch
import torch.nn as nn


class Learner:
    def __init__(self):
        self.net = nn.Linear(3, 1)
        self.rate = 0.5
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=self.rate)

    def decay(self):
        self.rate = self.rate * 0.5
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=self.rate)

    def run(self, rounds):
        for r in range(rounds):
            loss = self.net(torch.randn(6, 3)).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if r % 5 == 4:
                self.decay()


if __name__ == "__main__":
    Learner().run(20)
'''


def test_deepspeed_refuses_an_optimizer_a_method_rebuilds_in_the_loop() -> None:
    result = migrate_source(REBUILT, "deepspeed")
    assert result.new == REBUILT
    refusals = [f for f in result.findings if f.code == "MIG129"]
    assert [f.line for f in refusals] == [14]
    assert "in `Learner.decay()`, which the training loop calls" in refusals[0].message


def test_deepspeed_keeps_an_optimizer_a_method_rebuilds_outside_training() -> None:
    once = REBUILT.replace("            if r % 5 == 4:\n                self.decay()\n", "").replace(
        "    Learner().run(20)", "    learner = Learner()\n    learner.decay()\n    learner.run(20)")
    result = migrate_source(once, "deepspeed")
    assert "MIG129" not in {f.code for f in result.findings}
    assert "deepspeed.initialize(" in result.new


FROZEN = '''
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
{freeze}
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for step in range(10):
    loss = model(torch.randn(5, 4)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
'''


def test_freezing_an_indexed_layer_is_not_freezing_the_model() -> None:
    for freeze in ("for p in model[0].parameters():\n    p.requires_grad = False",
                   "model[0].requires_grad_(False)",
                   "model[-1].weight.requires_grad = False"):
        result = migrate_source(FROZEN.format(freeze=freeze), "ddp")
        assert "MIG104" not in {f.code for f in result.findings}, freeze
        assert "model = DDP(model)" in result.new, freeze


def test_freezing_the_whole_model_is_still_refused() -> None:
    result = migrate_source(FROZEN.format(freeze="for p in model.parameters():\n    p.requires_grad = False"), "ddp")
    assert "MIG104" in {f.code for f in result.findings}


HOISTED = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


def score(net, h):
    return net(torch.randn(2, 4)).sum().item() + h.sum().item()


def main():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 4)
    for step in range(10):
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        print("score", score(model, model.encoder(x)), model.encoder.weight.norm().item())


if __name__ == "__main__":
    main()
'''


def test_a_hoisted_print_keeps_the_edits_made_inside_it() -> None:
    new = migrate_source(HOISTED, "ddp").new
    assert "        message = score(model, model.module.encoder(x))  # computed on every rank" in new
    assert "            print(\"score\", message, model.module.encoder.weight.norm().item())" in new
    assert "model.encoder" not in new
    # the blank line above the print stays above the statements it became
    assert "optimizer.step()\n\n        message = " in new
