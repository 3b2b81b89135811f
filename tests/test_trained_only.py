"""Only trained networks count as models when the optimizers cannot be traced (built by a helper
of this file): a frozen network, a target network filled from another, a parameter-free module
and a type alias are called in training but are no models to wrap."""

from __future__ import annotations

import libcst as cst

from migrate.analysis import analyze

HEAD = """
import torch
import torch.nn as nn
import torchvision


def make_optimizer(module):
    return torch.optim.Adam(module.parameters(), lr=1e-3)


def main():
    model = nn.Linear(4, 4)
{setup}
    optimizer = make_optimizer(model)
    for step in range(10):
        x = torch.randn(8, 4)
        loss = {loss}
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def models_of(setup: str, loss: str) -> list[str]:
    source = HEAD.format(setup=setup, loss=loss)
    return sorted(m.spelling for m in analyze(cst.parse_module(source)).models)


def test_a_frozen_network_is_no_model() -> None:
    setup = "    vgg = torchvision.models.vgg16().features\n    for p in vgg.parameters():\n        p.requires_grad = False"
    assert models_of(setup, "(vgg(model(x)) - x).pow(2).mean()") == ["model"]


def test_a_network_frozen_with_requires_grad_is_no_model() -> None:
    setup = "    teacher = nn.Linear(4, 4)\n    teacher.requires_grad_(False)"
    assert models_of(setup, "(teacher(x) - model(x)).pow(2).mean()") == ["model"]


def test_a_frozen_network_given_a_new_head_is_still_trained() -> None:
    setup = ("    net = torchvision.models.resnet18()\n    for p in net.parameters():\n        p.requires_grad = False\n"
             "    net.fc = nn.Linear(512, 4)")
    assert models_of(setup, "(net(model(x)) - x).pow(2).mean()") == ["model", "net"]


def test_a_target_network_run_under_no_grad_is_no_model() -> None:
    setup = "    target_net = nn.Linear(4, 4)"
    loss = "(model(x) - target_net_out(x)).pow(2).mean()"
    source = HEAD.format(setup=setup, loss=loss).replace(
        "        loss =", "        with torch.no_grad():\n            t = target_net(x)\n        loss =").replace(
        "target_net_out(x)", "t")
    assert sorted(m.spelling for m in analyze(cst.parse_module(source)).models) == ["model"]


def test_a_polyak_target_is_no_model() -> None:
    setup = "    target = nn.Linear(4, 4)\n    target.load_state_dict(model.state_dict())"
    assert models_of(setup, "(model(x) - target(x)).pow(2).mean()") == ["model"]


def test_a_soft_updated_target_is_no_model() -> None:
    setup = "    target = nn.Linear(4, 4)"
    source = HEAD.format(setup=setup, loss="(model(x) - target(x)).pow(2).mean()") + (
        "        for p, tp in zip(model.parameters(), target.parameters()):\n"
        "            tp.data.copy_(0.01 * p.data + 0.99 * tp.data)\n")
    assert sorted(m.spelling for m in analyze(cst.parse_module(source)).models) == ["model"]


def test_both_kept_when_nothing_tells_them_apart() -> None:
    setup = "    other = nn.Linear(4, 4)"
    assert models_of(setup, "(model(x) - other(x)).pow(2).mean()") == ["model", "other"]
