"""deepspeed_engine: the model and the script's own optimizer become one engine right after both
exist, with ds_config.json's settings overwritten by the values the script computes itself;
a saved state_dict is gathered on every rank first. One engine per file: several trained models
are refused. (Every script that reaches this step gets an engine or is refused, so its no-op is
the refusal, which leaves the text as it was.)"""

from __future__ import annotations

from migrate.steps.deepspeed_engine import deepspeed_engine
from tests.steps.helpers import run_step

SCRIPT = """\
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=args.batch_size)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
"""

TWO_MODELS = """\
import torch
import torch.nn as nn

generator = nn.Linear(4, 4)
critic = nn.Linear(4, 1)
g_optimizer = torch.optim.Adam(generator.parameters())
c_optimizer = torch.optim.Adam(critic.parameters())
for step in range(100):
    fake = generator(torch.randn(8, 4))
    c_loss = critic(fake.detach()).mean()
    c_optimizer.zero_grad()
    c_loss.backward()
    c_optimizer.step()
    g_loss = -critic(fake).mean()
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
"""

ENGINE = [
    "",
    "    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself",
    "    # overwrite the file's, so the two never disagree",
    '    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:',
    "        ds_config = json.load(config_file)",
    '    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size',
    "    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)",
]


def test_the_engine_is_created_after_the_optimizer_with_the_script_s_batch_size() -> None:
    result = run_step(deepspeed_engine, SCRIPT, target="deepspeed")
    created = ("    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n" + "\n".join(ENGINE)
               + "\n    for x, y in loader:\n")
    assert created in result.text
    assert result.imports == ["import json", "import os", "import deepspeed"]
    assert not result.refused


def test_a_saved_state_dict_is_gathered_on_every_rank_first() -> None:
    result = run_step(deepspeed_engine, SCRIPT, target="deepspeed")
    assert result.removed == ['    torch.save(model.state_dict(), "model.pt")']
    assert result.added == [
        *ENGINE,
        "    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):"
        "  # ZeRO-3 shards the weights: every rank gathers",
        "        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}",
        '    torch.save(model_state, "model.pt")',
    ]
    assert result.findings == ()


def test_the_backward_and_step_are_left_for_engine_calls() -> None:
    result = run_step(deepspeed_engine, SCRIPT, target="deepspeed")
    assert "        loss.backward()\n        optimizer.step()\n" in result.text


def test_saving_the_optimizer_s_state_is_reported_under_zero() -> None:
    script = SCRIPT.replace('torch.save(model.state_dict(), "model.pt")', 'torch.save(optimizer.state_dict(), "optimizer.pt")')
    result = run_step(deepspeed_engine, script, target="deepspeed")
    assert result.codes == [("MIG118", 20)]
    assert run_step(deepspeed_engine, script, target="deepspeed", zero=0).findings == ()


def test_two_models_with_their_own_optimizers_get_one_engine_each() -> None:
    result = run_step(deepspeed_engine, TWO_MODELS, target="deepspeed")
    assert not result.refused and result.codes == []
    assert [line for line in result.text.splitlines() if "deepspeed.initialize" in line] == [
        "generator, g_optimizer, _, _ = deepspeed.initialize(model=generator, optimizer=g_optimizer, config=copy.deepcopy(ds_config))",
        "critic, c_optimizer, _, _ = deepspeed.initialize(model=critic, optimizer=c_optimizer, config=copy.deepcopy(ds_config))",
    ]


def test_two_models_sharing_one_optimizer_get_one_engine_over_both() -> None:
    shared = TWO_MODELS.replace("g_optimizer = torch.optim.Adam(generator.parameters())\n", "").replace(
        "c_optimizer = torch.optim.Adam(critic.parameters())",
        "c_optimizer = torch.optim.Adam(list(generator.parameters()) + list(critic.parameters()))",
    ).replace("g_optimizer", "c_optimizer")
    result = run_step(deepspeed_engine, shared, target="deepspeed")
    assert not result.refused and result.codes == []
    assert [line for line in result.text.splitlines() if "c_optimizer, _, _" in line or "ModuleDict" in line] == [
        'generator_critic = torch.nn.ModuleDict({"generator": generator, "critic": critic})',
        "generator_critic, c_optimizer, _, _ = deepspeed.initialize(model=generator_critic, optimizer=c_optimizer, "
        "config=ds_config)",
    ]


HELD = """\
import torch
import torch.nn as nn


class Stepper:
    def __init__(self, optimizer):
        self.optimizer = optimizer

    def advance(self):
        self.optimizer.step()


model = nn.Linear(4, 1)
stepper = Stepper(torch.optim.SGD(model.parameters(), lr=0.1))
for step in range(100):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    CLIP
    stepper.advance()
"""


def test_an_optimizer_inside_the_scripts_own_class_goes_to_deepspeed_and_back() -> None:
    result = run_step(deepspeed_engine, HELD.replace("    CLIP\n", ""), target="deepspeed")
    assert not result.refused and result.codes == []
    assert ("stepper.optimizer, _, _ = deepspeed.initialize(model=model, optimizer=stepper.optimizer, config=ds_config)"
            in result.text)


def test_an_optimizer_inside_the_scripts_own_class_with_clipping_is_refused() -> None:
    script = HELD.replace("CLIP", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)")
    result = run_step(deepspeed_engine, script, target="deepspeed")
    assert result.refused and result.text == result.source
    assert [code for code, _line in result.codes] == ["MIG129"]
    assert "`stepper.advance()`" in result.findings[0].message and "gradient clipping" in result.findings[0].message
