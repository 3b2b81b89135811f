"""The analysis several targets share, asked directly on short scripts: where the model, its
optimizer and its LR schedulers all exist (analysis.ordering), gradient accumulation
(analysis.accumulation), the trained model's state_dict() reads (analysis.state_dicts), and the
training loader names analyze() stores."""

from __future__ import annotations

import textwrap

import libcst as cst

from migrate.analysis import analyze
from migrate.analysis.ordering import ModelOrdering, NoModelOrdering, Unordered, model_ordering
from migrate.analysis.sites import TrainingSites
from migrate.analysis.state_dicts import model_state_dicts

HEADER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
"""


def sites_of(body: str) -> TrainingSites:
    return analyze(cst.parse_module(HEADER + textwrap.dedent(body)))


def code(sites: TrainingSites, node: cst.CSTNode) -> str:
    return sites.index.module.code_for_node(node).strip()


def test_the_anchor_is_the_scheduler_built_after_model_and_optimizer() -> None:
    sites = sites_of("""
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
    """)
    ordering = model_ordering(sites)
    assert isinstance(ordering, ModelOrdering)
    assert ordering.optimizer == "optimizer"
    assert code(sites, ordering.anchor) == "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)"
    assert ordering.model.spelling == "model"
    assert ordering.model.wrap_after is ordering.anchor and ordering.model.wrap_before is None
    assert ordering.compiled_first is None
    assert model_ordering(sites) is ordering  # computed once


def test_several_models_are_a_reason() -> None:
    sites = sites_of("""
        generator = nn.Linear(4, 4)
        critic = nn.Linear(4, 1)
        opt_g = torch.optim.Adam(generator.parameters())
        opt_c = torch.optim.Adam(critic.parameters())
        for x, y in loader:
            loss_c = critic(x).mean()
            loss_c.backward()
            opt_c.step()
            loss_g = -critic(generator(x)).mean()
            loss_g.backward()
            opt_g.step()
    """)
    ordering = model_ordering(sites)
    assert isinstance(ordering, NoModelOrdering)
    assert ordering.reason is Unordered.SEVERAL_MODELS
    assert sorted(m.spelling for m in ordering.models) == ["critic", "generator"]


def test_an_optimizer_built_in_another_function_is_a_reason() -> None:
    sites = sites_of("""
        model = nn.Linear(4, 1)

        def train():
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()

        train()
    """)
    ordering = model_ordering(sites)
    assert isinstance(ordering, NoModelOrdering)
    assert ordering.reason is Unordered.OPTIMIZER_ELSEWHERE
    assert [m.spelling for m in ordering.models] == ["model"]


ACCUMULATING = textwrap.dedent("""
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    k = 4
    for i, (x, y) in enumerate(loader):
        loss = {forward} / k
        loss.backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()
""")


def test_accumulation_is_found_once_with_its_factor() -> None:
    sites = sites_of(ACCUMULATING.format(forward="nn.functional.mse_loss(model(x), y)"))
    [accumulation] = sites.accumulations
    assert code(sites, accumulation.factor) == "k"
    assert code(sites, accumulation.condition) == "(i + 1) % k == 0"
    assert accumulation.model == "model"
    assert accumulation.first is not None and code(sites, accumulation.first).startswith("loss = ")
    assert code(sites, accumulation.last) == "loss.backward()"


def test_accumulation_with_the_forward_in_a_helper_starts_where_the_helper_is_given_the_model() -> None:
    sites = sites_of(ACCUMULATING.format(forward="compute_loss(model, x, y)") + textwrap.dedent("""
        def compute_loss(net, x, y):
            return nn.functional.mse_loss(net(x), y)
    """))
    [accumulation] = sites.accumulations
    assert code(sites, accumulation.factor) == "k"
    assert accumulation.first is not None and code(sites, accumulation.first).startswith("loss = compute_loss(model")
    assert sites.notes == []


def test_accumulation_with_the_forward_outside_the_micro_step_keeps_its_factor() -> None:
    sites = sites_of(ACCUMULATING.format(forward="losses[i]").replace(
        "for i, (x, y)", "losses = [nn.functional.mse_loss(model(x), y) for x, y in loader]\nfor i, (x, y)"))
    [accumulation] = sites.accumulations
    assert code(sites, accumulation.factor) == "k"
    assert accumulation.first is None  # nothing to wrap in no_sync here...
    assert [note[0] for note in sites.notes] == ["MIG109"]  # ...and this says why


def test_an_update_test_kept_in_a_variable_is_followed_to_its_value() -> None:
    sites = sites_of(ACCUMULATING.format(forward="nn.functional.mse_loss(model(x), y)").replace(
        "    if (i + 1) % k == 0:", "    update = (i + 1) % k == 0 or i + 1 == len(loader)\n    if update:"))
    [accumulation] = sites.accumulations
    assert code(sites, accumulation.condition) == "(i + 1) % k == 0 or i + 1 == len(loader)"
    assert code(sites, accumulation.factor) == "k"


def test_a_scheduler_stepped_every_n_batches_is_no_accumulation() -> None:
    sites = sites_of("""
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        lr_sched = torch.optim.lr_scheduler.StepLR(optimizer, 10)
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            if i % 100 == 0:
                lr_sched.step()
    """)
    assert sites.accumulations == []


def test_saving_the_model_state_dict_is_recognised_and_other_saves_are_not() -> None:
    sites = sites_of("""
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        other = {"epochs": 1}
        torch.save(other, "other.pt")
        torch.save(model.state_dict(), "model.pt")
    """)
    ordering = model_ordering(sites)
    assert isinstance(ordering, ModelOrdering)
    [read] = model_state_dicts(sites.index, ordering.model)
    assert read.owner == "model"
    assert code(sites, read.call) == "model.state_dict()"
    assert code(sites, read.stmt) == 'torch.save(model.state_dict(), "model.pt")'


def test_training_loader_names_are_stored() -> None:
    sites = sites_of("""
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        train_loader = loader
        for x, y in train_loader:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    """)
    assert "train_loader" in sites.training_loader_names
