"""to-fsdp on a trainer class that builds its optimizer over a local name and only then keeps the
model on `self` (`self.model, self.optimizer = model, optimizer`): the shard must go above the
optimizer under the local's name, or the optimizer holds the unsharded parameters and the model
never learns (reviewer's corpus w045). A local bound again in between is refused (MIG303)."""

from __future__ import annotations

import textwrap

from migrate import migrate_source

TEMPLATE = """\
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 1)

    def forward(self, x):
        return self.proj(x)

    def rank_items(self, x):
        return self.proj(x).argsort(0)


class Job:
    def __init__(self):
{init}

    def step(self, x, y):
        self.optimizer.zero_grad()
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        self.optimizer.step()
        return self.model.rank_items(x)


def main():
    job = Job()
    for _ in range(4):
        job.step(torch.randn(5, 3), torch.randn(5, 1))


if __name__ == "__main__":
    main()
"""


def convert(init: str):  # type: ignore[no-untyped-def]
    source = TEMPLATE.replace("{init}", textwrap.indent(textwrap.dedent(init).strip("\n"), " " * 8))
    return migrate_source(source, "fsdp", path="job.py")


def shard_line_above(result, optimizer: str, name: str) -> None:  # type: ignore[no-untyped-def]
    lines = [line.strip() for line in result.new.splitlines()]
    at = lines.index(optimizer)
    assert any(line in (f"fully_shard({name})", f"fully_shard({name}, mesh=device_mesh)") for line in lines[:at]), result.new
    assert not any(line.startswith("fully_shard(") for line in lines[at:]), result.new


def test_the_tuple_form_shards_the_local_above_the_optimizer() -> None:
    result = convert("""
        model = Scorer()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.model, self.optimizer = model, optimizer
        if torch.cuda.is_available():
            self.model = self.model.cuda()
    """)
    shard_line_above(result, "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", "model")
    # the method the script calls on the model is registered under the name bound at the shard
    assert 'register_fsdp_forward_method(model, "rank_items")' in result.new
    assert "self.model = self.model.to(" in result.new  # a move of the sharded module stays where it was


def test_a_plain_attribute_binding_is_followed_back() -> None:
    result = convert("""
        model = Scorer()
        self.optimizer = torch.optim.Adam(model.parameters())
        self.model = model
    """)
    shard_line_above(result, "self.optimizer = torch.optim.Adam(model.parameters())", "model")


def test_a_binding_through_a_move_is_followed_back() -> None:
    result = convert("""
        net = Scorer()
        self.optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        self.model = net.to("cpu")
    """)
    shard_line_above(result, "self.optimizer = torch.optim.SGD(net.parameters(), lr=0.1)", "net")


def test_an_optimizer_over_the_attribute_itself_shards_the_attribute() -> None:
    result = convert("""
        model = Scorer()
        self.model = model
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
    """)
    shard_line_above(result, "self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)", "self.model")


def test_a_local_bound_again_before_the_attribute_is_refused() -> None:
    result = convert("""
        model = Scorer()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model = Scorer()
        self.model, self.optimizer = model, optimizer
    """)
    assert result.new == result.old
    refusal = [f for f in result.findings if f.code == "MIG303"]
    optimizer_line = result.old.splitlines().index("        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)") + 1
    assert [f.line for f in refusal] == [optimizer_line], [(f.code, f.message) for f in result.findings]
    assert "bound again" in refusal[0].message and "self.model" in refusal[0].message
