"""to-fsdp on three shapes a reviewer found in real projects, written here as one-file scripts:

- a trainer class handed the model and its optimizer by keyword, read from `**kwargs` in its
  `__init__` (`self.model = kwargs["model"].to(device)`): the shard must go in the caller, above the
  optimizer, or the optimizer holds the unsharded parameters and the model never learns; where the
  caller's optimizer cannot be found (two callers, `Trainer(**parts)`) the file is refused (MIG303);
- a target network synced from the sharded one (`target.load_state_dict(net.state_dict())`): every
  rank loads it, so every rank must receive the whole state dict (no `cpu_offload`, which leaves the
  other ranks `{}` and their load fails with "Missing key(s)");
- a save helper method of an agent class: the gather runs on every rank and only rank 0 writes, so
  the other ranks' `{}` never overwrites the checkpoint.
"""

from __future__ import annotations

import textwrap

from migrate import migrate_source

NET = """\
import argparse

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)

"""

TRAINER = NET + """
class Trainer:
    def __init__({params}):
{init}

    def fit(self):
        for _ in range(3):
            x = torch.randn(8, 4, device=self.args.device)
            loss = self.model(x).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    args = parser.parse_args()
    args.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
{call}
    trainer.fit()


if __name__ == "__main__":
    main()
"""

BY_KWARGS = """\
self.args = kwargs["args"]
self.model = kwargs["model"].to(self.args.device)
self.optimizer = kwargs["optimizer"]
"""


def trainer(params: str, init: str, call: str):  # type: ignore[no-untyped-def]
    source = (TRAINER.replace("{params}", params)
              .replace("{init}", textwrap.indent(textwrap.dedent(init).strip("\n"), " " * 8))
              .replace("{call}", textwrap.indent(textwrap.dedent(call).strip("\n"), " " * 4)))
    return migrate_source(source, "fsdp", path="train.py")


def lines_of(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def assert_sharded_above_the_optimizer(result) -> None:  # type: ignore[no-untyped-def]
    lines = lines_of(result.new)
    shards = [at for at, line in enumerate(lines) if line.startswith("fully_shard(")]
    optimizer = lines.index("optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)")
    assert [lines[at] for at in shards] == ["fully_shard(model)"], result.new
    assert shards[0] < optimizer, result.new
    init = lines.index("def fit(self):")
    assert not any(line.startswith("fully_shard(") for line in lines[lines.index("class Trainer:"):init]), result.new


def test_a_model_read_from_kwargs_is_sharded_above_the_callers_optimizer() -> None:
    result = trainer("self, *args, **kwargs", BY_KWARGS, "trainer = Trainer(model=model, optimizer=optimizer, args=args)")
    assert_sharded_above_the_optimizer(result)
    assert not [f for f in result.findings if f.code == "MIG303"]


def test_kwargs_get_is_followed_too() -> None:
    init = BY_KWARGS.replace('kwargs["model"]', 'kwargs.get("model")')
    result = trainer("self, **kwargs", init, "trainer = Trainer(args=args, optimizer=optimizer, model=model)")
    assert_sharded_above_the_optimizer(result)


def test_named_parameters_passed_by_keyword_are_followed() -> None:
    init = """\
    self.args = args
    self.model = model.to(self.args.device)
    self.optimizer = optimizer
    """
    result = trainer("self, model, optimizer, args", init, "trainer = Trainer(model=model, optimizer=optimizer, args=args)")
    assert_sharded_above_the_optimizer(result)


def test_the_model_class_behind_kwargs_is_read_for_its_blocks() -> None:
    result = trainer("self, *args, **kwargs", BY_KWARGS, "trainer = Trainer(model=model, optimizer=optimizer, args=args)")
    sharding = [f.message for f in result.findings if f.code == "MIG301"]
    assert len(sharding) == 1 and "`Net` holds no list of repeated blocks" in sharding[0], sharding


def refusal(result) -> str:  # type: ignore[no-untyped-def]
    assert result.new == result.old, result.new
    refused = [f for f in result.findings if f.code == "MIG303"]
    assert len(refused) == 1, [(f.code, f.message) for f in result.findings]
    return str(refused[0].message)


def test_two_callers_handing_model_and_optimizer_are_refused() -> None:
    call = """\
    if args.device.type == "cpu":
        trainer = Trainer(model=model, optimizer=optimizer, args=args)
    else:
        trainer = Trainer(args=args, model=model, optimizer=optimizer)
    """
    message = refusal(trainer("self, *args, **kwargs", BY_KWARGS, call))
    assert "`self.optimizer` and `self.model` are both handed in to `Trainer`" in message
    assert "the file is left unchanged" in message


def test_a_hand_off_through_a_dict_is_refused() -> None:
    call = """\
    parts = dict(model=model, optimizer=optimizer, args=args)
    trainer = Trainer(**parts)
    """
    message = refusal(trainer("self, *args, **kwargs", BY_KWARGS, call))
    assert "fully_shard(model)" in message and "before it builds the optimizer" in message


def test_a_positional_hand_off_from_two_callers_is_refused() -> None:
    init = """\
    self.args = args
    self.model = model
    self.optimizer = optimizer
    """
    call = """\
    if args.device.type == "cpu":
        trainer = Trainer(model, optimizer, args)
    else:
        trainer = Trainer(model, optimizer, args)
    """
    refusal(trainer("self, model, optimizer, args", init, call))


def test_an_optimizer_built_in_the_class_is_not_refused() -> None:
    init = """\
    self.args = kwargs["args"]
    self.model = kwargs["model"].to(self.args.device)
    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
    """
    call = """\
    parts = dict(model=model, args=args)
    trainer = Trainer(**parts)
    """
    result = trainer("self, **kwargs", init, call)
    lines = lines_of(result.new)
    assert "fully_shard(self.model)" in lines, result.new
    assert lines.index("fully_shard(self.model)") < lines.index("self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)")


AGENT = NET + """
class Agent:
    def __init__(self):
        self.net = Net()
        self.target = Net()
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.update_target()

    def update_target(self):
{sync}

    def learn(self, x):
        loss = (self.net(x) - self.target(x).detach()).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def save(self, path):
        torch.save(self.net.state_dict(), path)


def main():
    agent = Agent()
    for step in range(4):
        agent.learn(torch.randn(8, 4))
        if step % 2:
            agent.update_target()
    agent.save("agent.pt")


if __name__ == "__main__":
    main()
"""


def agent(sync: str, target: str = "fsdp"):  # type: ignore[no-untyped-def]
    source = AGENT.replace("{sync}", textwrap.indent(textwrap.dedent(sync).strip("\n"), " " * 8))
    return migrate_source(source, target, path="agent.py")


def method_lines(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    start = next(at for at, line in enumerate(lines) if line.strip().startswith(f"def {name}("))
    end = next((at for at in range(start + 1, len(lines)) if lines[at].strip().startswith("def ")), len(lines))
    return [line.strip() for line in lines[start + 1:end] if line.strip()]


def test_a_target_network_synced_from_the_sharded_one_gets_the_whole_dict_on_every_rank() -> None:
    result = agent("self.target.load_state_dict(self.net.state_dict())")
    body = method_lines(result.new, "update_target")
    assert body[0].startswith("net_state = get_model_state_dict(self.net, options=StateDictOptions(full_state_dict=True))"), body
    assert "cpu_offload" not in body[0]
    assert body[1] == "self.target.load_state_dict(net_state)", body
    assert not [f for f in result.findings if f.code == "MIG303"]


def test_a_sync_through_a_name_and_a_deep_copy_gets_the_whole_dict_too() -> None:
    for sync in ("weights = self.net.state_dict()\nself.target.load_state_dict(weights)",
                 "import copy\nself.target.load_state_dict(copy.deepcopy(self.net.state_dict()))"):
        body = method_lines(agent(sync).new, "update_target")
        gathers = [line for line in body if "get_model_state_dict(" in line]
        assert len(gathers) == 1 and "StateDictOptions(full_state_dict=True))" in gathers[0], body


def test_the_save_helper_gathers_on_every_rank_and_writes_on_rank_zero() -> None:
    result = agent("self.target.load_state_dict(self.net.state_dict())")
    body = method_lines(result.new, "save")
    assert body == [
        "net_state = get_model_state_dict(self.net, options=StateDictOptions(full_state_dict=True, cpu_offload=True))"
        "  # every rank gathers; rank 0 gets the full weights",
        "if dist.get_rank() == 0:",
        "torch.save(net_state, path)",
    ], body


def test_the_save_helper_is_guarded_for_ddp_too() -> None:
    body = method_lines(agent("self.target.load_state_dict(self.net.state_dict())", "ddp").new, "save")
    assert body == ["if dist.get_rank() == 0:", "torch.save(self.net.module.state_dict(), path)"], body


def test_weights_loaded_back_into_the_sharded_model_stay_gathered_for_rank_zero() -> None:
    source = NET + """
def main():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    best = model.state_dict()
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.load_state_dict(best)


if __name__ == "__main__":
    main()
"""
    lines = lines_of(migrate_source(source, "fsdp", path="train.py").new)
    assert "best = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))" in lines
    assert any(line.startswith("set_model_state_dict(model, best,") for line in lines), lines
