"""Which modules are trained (and so wrapped), which functions receive the wrapped one, and the
control flow that would make ranks diverge: the analysis answers, on small scripts."""

from __future__ import annotations

import libcst as cst

from migrate import migrate_source
from migrate.analysis import analyze
from migrate.analysis.models import unwrapped_too


def models_of(source: str) -> list[str]:
    return [m.spelling for m in analyze(cst.parse_module(source)).models]


def codes(source: str, target: str = "ddp") -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for f in migrate_source(source, target, path="train.py").findings:
        found.setdefault(f.code, []).append(f.line)
    return found


LOOP = """
    for step in range(100):
        x = torch.randn(8, 4)
        loss = {loss}
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def script(setup: str, loss: str) -> str:
    body = "\n".join("    " + line for line in setup.strip().splitlines())
    return "import itertools\nimport torch\nimport torch.nn as nn\n\n\ndef main():\n" + body + LOOP.format(loss=loss) + (
        "\n\nif __name__ == \"__main__\":\n    main()\n"
    )


def test_param_groups_chain_and_grown_lists_name_the_trained_modules() -> None:
    loss = "head(body(x)).pow(2).mean() + probe(x).mean()"
    setup = "body = nn.Linear(4, 4)\nhead = nn.Linear(4, 1)\nprobe = nn.Linear(4, 1).requires_grad_(False)\n"
    assert models_of(script(setup + "optimizer = torch.optim.SGD([{'params': body.parameters()}, "
                                    "{'params': head.parameters(), 'lr': 0.1}], lr=0.01)", loss)) == ["head", "body"]
    assert models_of(script(setup + "optimizer = torch.optim.SGD(itertools.chain(body.parameters(), head.parameters()), lr=0.1)",
                            loss)) == ["head", "body"]
    assert models_of(script(setup + "params = list(body.parameters())\nparams += list(head.parameters())\n"
                                    "optimizer = torch.optim.SGD(params, lr=0.1)", loss)) == ["head", "body"]


def test_an_optimizer_that_cannot_be_traced_keeps_every_module_but_copies() -> None:
    setup = "import copy\nnet = nn.Linear(4, 1)\nema = copy.deepcopy(net)\noptimizer = make_optimizer(net)"
    assert models_of(script(setup, "(net(x) - ema(x)).pow(2).mean()")) == ["net"]


def test_a_function_given_the_wrapped_model_and_an_unwrapped_one_is_named() -> None:
    source = """
import torch
import torch.nn as nn


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)

    def generate(self, x):
        return self(x).argmax(-1)


def sample(model, x):
    return model.generate(x)


def main():
    model = LM()
    ema = LM()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        x = torch.randn(2, 4)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(sample(model, x), sample(ema, x))


if __name__ == "__main__":
    main()
"""
    sites = analyze(cst.parse_module(source))
    assert [m.spelling for m in sites.models] == ["model"]
    assert unwrapped_too(sites.index, sites.models[0]) == {("model", "sample")}


def test_a_random_number_of_micro_steps_and_a_skipped_step_are_reported() -> None:
    setup = "import random\nnet = nn.Linear(4, 1)\noptimizer = torch.optim.SGD(net.parameters(), lr=0.1)"
    micro = script(setup, "net(x).pow(2).mean()").replace(
        "        loss.backward()\n", "        for _ in range(random.randint(1, 3)):\n            loss.backward(retain_graph=True)\n"
    )
    assert "MIG122" in codes(micro)
    skipped = script(setup, "net(x).pow(2).mean()").replace(
        "        optimizer.zero_grad()\n", "        if not torch.isfinite(loss):\n            continue\n        optimizer.zero_grad()\n"
    )
    assert "MIG121" in codes(skipped) and "MIG121" in codes(skipped, "deepspeed")


def test_weights_initialised_right_after_construction_are_wrapped_after_it() -> None:
    setup = ("net = nn.Linear(4, 1)\nnet.apply(lambda m: None)\nnn.init.zeros_(net.weight)\n"
             "optimizer = torch.optim.SGD(net.parameters(), lr=0.1)")
    result = migrate_source(script(setup, "net(x).pow(2).mean()"), "ddp", path="train.py")
    lines = result.new.splitlines()
    assert lines.index("    net = DDP(net)") == lines.index("    nn.init.zeros_(net.weight)") + 1
    assert "MIG123" not in {f.code for f in result.findings}


def test_a_per_rank_value_that_only_logs_is_not_reported() -> None:
    setup = "net = nn.Linear(4, 1)\noptimizer = torch.optim.SGD(net.parameters(), lr=0.1)\nbest = 1e9"
    source = script(setup, "net(x).pow(2).mean()").replace(
        "        optimizer.step()\n", "        optimizer.step()\n        if loss.item() < best:\n            best = loss.item()\n"
    )
    assert not {"MIG121", "MIG122", "MIG123"} & set(codes(source))
