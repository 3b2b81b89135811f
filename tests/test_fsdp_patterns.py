"""to-fsdp on the FSDP2 shapes real scripts showed (issue 24, pattern 9): which methods are
registered with register_fsdp_forward_method (never one that builds the optimizer or rewrites
weights), weights read as plain tensors in a parameter loop, a submodule cast to its own dtype."""

from __future__ import annotations

import textwrap

from migrate import migrate_source

MODEL = """\
import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.body = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.body(self.embed(x)))

    def decode(self, x):
        return self.body(self.embed(x)).argmax(-1)

    def param_groups(self):
        return [{"params": [p for p in self.parameters() if p.dim() > 1]}]

    def make_opt(self, lr):
        return torch.optim.SGD(self.parameters(), lr=lr)

    def shrink(self):
        with torch.no_grad():
            self.body.weight.copy_(self.body.weight * 0.5)

    def reinit(self):
        self.apply(self._init)

    def _init(self, module):
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)


def main():
    model = Net()
{body}


if __name__ == "__main__":
    main()
"""


def convert(body: str):  # type: ignore[no-untyped-def]
    source = MODEL.replace("{body}", textwrap.indent(textwrap.dedent(body), "    "))
    return migrate_source(source, "fsdp", path="train.py")


def line_of(result, text: str) -> int:  # type: ignore[no-untyped-def]
    return next(n for n, line in enumerate(result.old.splitlines(), 1) if text in line)


def codes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [finding.code for finding in result.findings]


def test_a_method_that_builds_the_optimizer_is_not_registered() -> None:
    for builds in ("model.make_opt(0.1)", "torch.optim.SGD(model.param_groups(), lr=0.1)"):
        result = convert(f"""
            optimizer = {builds}
            loss = model(torch.tensor([1])).sum()
            loss.backward()
            optimizer.step()
            print(model.decode(torch.tensor([1])))
        """)
        assert 'register_fsdp_forward_method(model, "decode")' in result.new
        assert "make_opt\")" not in result.new and "param_groups\")" not in result.new
        # the shard goes above the optimizer, which holds the shards
        assert result.new.index("fully_shard(model") < result.new.index(f"optimizer = {builds}")


def test_a_method_that_rewrites_weights_after_the_shard_is_refused() -> None:
    for rewrite in ("model.shrink()", "model.reinit()"):
        result = convert(f"""
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model(torch.tensor([1])).sum().backward()
            optimizer.step()
            {rewrite}
        """)
        assert result.new == result.old
        refusal = [f for f in result.findings if f.code == "MIG309"]
        assert [f.line for f in refusal] == [line_of(result, rewrite)], codes(result)
        assert rewrite.removesuffix("()") in refusal[0].message


def test_a_weight_rewrite_before_the_shard_converts() -> None:
    result = convert("""
        model.reinit()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.tensor([1])).sum().backward()
        optimizer.step()
    """)
    assert "MIG309" not in codes(result) and "fully_shard(model" in result.new
    assert "register_fsdp_forward_method" not in result.new


def test_weights_read_as_arrays_in_a_parameter_loop_are_refused() -> None:
    for read in ("np.histogram(p.data.cpu().numpy())", "p.view(-1)[:3]", "p.detach().cpu().tolist()"):
        result = convert(f"""
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model(torch.tensor([1])).sum().backward()
            optimizer.step()
            for name, p in model.named_parameters():
                print(name, {read})
        """)
        assert result.new == result.old, read
        found = [f for f in result.findings if f.code == "MIG307"]
        assert [f.line for f in found] == [line_of(result, read)] and "named_parameters" in found[0].message


def test_an_in_place_clip_in_a_parameter_loop_converts() -> None:
    result = convert("""
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.tensor([1])).sum().backward()
        optimizer.step()
        for p in model.parameters():
            p.data.clamp_(-0.01, 0.01)
    """)
    assert "MIG307" not in codes(result) and "fully_shard(model" in result.new


def test_a_submodule_cast_to_its_own_dtype_is_its_own_unit_below_the_cast() -> None:
    for cast in ("model.body.half()", "model.half()\nmodel.norm.float()", "model.body.to(torch.bfloat16)"):
        part = cast.split("\n")[-1].split(".")[1]
        result = convert(f"""
            {textwrap.indent(cast, "            ").strip()}
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model(torch.tensor([1])).sum().backward()
            optimizer.step()
        """)
        new = result.new
        last_cast = new.index(cast.split("\n")[-1])
        assert last_cast < new.index(f"fully_shard(model.{part}") < new.index("fully_shard(model,"), new


def test_a_whole_model_cast_adds_no_unit() -> None:
    result = convert("""
        model.half()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.tensor([1])).sum().backward()
        optimizer.step()
    """)
    assert "fully_shard(model." not in result.new and "fully_shard(model," in result.new
