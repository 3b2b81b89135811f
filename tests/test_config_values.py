"""The numbers a generated config gets from the script (analysis.values), each way of following a
value on a short script, and what a name is known to be (analysis.kinds) before generated code
reads an attribute of it. The golden cases `config_*` show the same through whole conversions."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from migrate.analysis.index import ScriptIndex, build_index
from migrate.analysis.kinds import Kind, data_loaders, unbatched, value_kind
from migrate.analysis.syntax import argument
from migrate.analysis.values import Number, literal_value
from migrate.api import migrate_source

IMPORTS = """\
import argparse
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
"""


def index_of(body: str) -> ScriptIndex:
    return build_index(cst.parse_module(IMPORTS + textwrap.dedent(body)))


def batch_size(body: str) -> Number | None:
    """The number the last DataLoader call's batch_size always has."""
    index = index_of(body)
    call = index.calls_named("torch.utils.data.DataLoader")[-1]
    arg = argument(call.node, "batch_size", 1)
    assert arg is not None
    return literal_value(index, arg.value, call.place.scope)


def kind_at_end(body: str, name: str) -> Kind | None:
    """What `name` is, read in the function `main` of the script."""
    index = index_of(body)
    return value_kind(index, cst.parse_expression(name), index.functions["main"])


# -- following a value --------------------------------------------------------------------------

def test_an_argparse_default_is_followed_through_a_helper_that_parses() -> None:
    assert batch_size("""
        def get_args():
            parser = argparse.ArgumentParser()
            parser.add_argument("--batch-size", type=int, default=64)
            return parser.parse_args()

        def main():
            args = get_args()
            loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=args.batch_size)
    """) == 64


def test_parse_known_args_gives_parsed_arguments_first() -> None:
    assert batch_size("""
        parser = argparse.ArgumentParser()
        parser.add_argument("--batch-size", type=int, default=40)
        args, _ = parser.parse_known_args()
        loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=args.batch_size)
    """) == 40


@pytest.mark.parametrize("declared, read", [("'-batch_size'", "batch_size"), ("'-b', '--batch-size'", "batch_size"),
                                             ("'-mini-batch'", "mini_batch")])
def test_argparse_destinations_follow_argparse_s_rule(declared: str, read: str) -> None:
    """The first long option names it, else the first short one (`-batch_size` is args.batch_size)."""
    assert batch_size(f"""
        parser = argparse.ArgumentParser()
        parser.add_argument({declared}, type=int, default=24)
        args = parser.parse_args()
        loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=args.{read})
    """) == 24


def test_an_argument_the_script_assigns_itself_is_not_its_default() -> None:
    assert batch_size("""
        parser = argparse.ArgumentParser()
        parser.add_argument("--batch-size", type=int, default=64)
        args = parser.parse_args()
        args.batch_size = args.batch_size * 2
        loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=args.batch_size)
    """) is None


@pytest.mark.parametrize(("call", "expected"), [
    ("train(args, args.batch_size)", 48),
    ("train(args, 32)", 32),
    ("train(args)", 16),  # the parameter's default
    ("train(args, 32)\ntrain(args, 64)", None),  # callers that disagree: no one number
])
def test_a_parameter_is_followed_to_what_its_callers_pass(call: str, expected: int | None) -> None:
    assert batch_size(textwrap.dedent("""
        def train(args, batch_size=16):
            loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=batch_size)

        parser = argparse.ArgumentParser()
        parser.add_argument("--batch-size", type=int, default=48)
        args = parser.parse_args()
    """) + call + "\n") == expected


def test_a_module_constant_is_read_through_a_local_of_the_same_name_elsewhere() -> None:
    assert batch_size("""
        batch_size = 64

        def evaluate(dataset):
            batch_size = 512
            return batch_size

        def main():
            loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=batch_size)
    """) == 64


@pytest.mark.parametrize("rebinding", ["batch_size *= 2", "for batch_size in (8, 16):\n    pass"])
def test_a_name_also_stored_another_way_is_no_constant(rebinding: str) -> None:
    assert batch_size("batch_size = 64\n" + rebinding + "\n"
                      "loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=batch_size)\n") is None


def test_a_dict_entry_is_followed_through_the_parameter_it_is_passed_as() -> None:
    assert batch_size("""
        def main(settings):
            loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=settings["batch_size"])

        SETTINGS = {"learning_rate": 5e-4, "batch_size": 16}
        main(SETTINGS)
    """) == 16


def test_a_dict_call_is_a_dict_literal_too() -> None:
    assert batch_size("""
        config = dict(batch_size=24, lr=0.1)
        loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=config["batch_size"])
    """) == 24


@pytest.mark.parametrize(("change", "expected"), [
    ('config["batch_size"] = 8', None),
    ('config.update({"batch_size": 8})', None),
    ('config.update({"lr": 0.5})', 32),  # another key: the batch size stays
])
def test_a_dict_entry_the_script_may_change_is_not_read(change: str, expected: int | None) -> None:
    assert batch_size(f"""
        config = {{"batch_size": 32, "lr": 0.1}}
        {change}
        loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=config["batch_size"])
    """) == expected


def test_an_attribute_of_an_instance_of_a_class_of_this_file_is_what_its_methods_bind() -> None:
    assert batch_size("""
        class Config:
            def __init__(self, batch_size=32):
                self.batch_size = batch_size

        config = Config()
        loader = DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=config.batch_size)
    """) == 32


# -- what a name is -----------------------------------------------------------------------------

MADE = """
    class Pairs(torch.utils.data.Dataset):
        def __len__(self):
            return 8

    def make_loader(data, batch_size=8):
        def collate(batch):
            return batch
        return DataLoader(data, batch_size=batch_size, collate_fn=collate)

    def main():
        batches = torch.randn(10, 4, 8).to("cpu")
        train_set = TensorDataset(torch.randn(8, 1))
        pairs = Pairs()
        model = nn.Linear(8, 1).to("cpu")
        samples = 1024
        loader = make_loader(train_set)
        unbatched = DataLoader(train_set, batch_size=None)
"""


@pytest.mark.parametrize(("name", "kind"), [
    ("batches", Kind.TENSOR),
    ("train_set", Kind.DATASET),
    ("pairs", Kind.DATASET),
    ("model", Kind.MODULE),
    ("samples", Kind.NUMBER),
    ("loader", Kind.DATA_LOADER),  # returned by a helper of this file (its nested function's return is not its own)
    ("unbatched", Kind.DATA_LOADER),
    ("undefined_here", None),
])
def test_a_name_is_known_by_what_makes_it(name: str, kind: Kind | None) -> None:
    assert kind_at_end(MADE, name) is kind


def test_a_data_loader_without_batch_size_is_told_apart() -> None:
    index = index_of(MADE)
    main = index.functions["main"]
    loaders = data_loaders(index, cst.parse_expression("unbatched"), main)
    assert loaders is not None and unbatched(loaders[0]) == "batch_size=None (its dataset yields whole batches)"
    batching = data_loaders(index, cst.parse_expression("loader"), main)
    assert batching is not None and unbatched(batching[0]) is None
    assert data_loaders(index, cst.parse_expression("batches"), main) is None


# -- the DeepSpeed config -----------------------------------------------------------------------

TENSOR_BATCHES = """\
import torch
import torch.nn as nn


def fit(model, optimizer, batches):
    for x in batches:
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main():
    batches = torch.randn(50, 32, 8)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    fit(model, optimizer, batches)


if __name__ == "__main__":
    main()
"""


def test_no_override_is_built_from_a_tensor_and_the_finding_says_what_it_is() -> None:
    result = migrate_source(TENSOR_BATCHES, "deepspeed")
    assert "batches.batch_size" not in result.new
    messages = [f.message for f in result.findings if f.code == "MIG116"]
    assert messages == ['`batches` is a tensor, not a DataLoader: ds_config.json fixes "train_micro_batch_size_per_gpu" '
                        "at 1; keep the two equal"]
