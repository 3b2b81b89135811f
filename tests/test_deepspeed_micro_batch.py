"""to-deepspeed's train_micro_batch_size_per_gpu comes from the DataLoader that feeds the backward,
never from an evaluation loader that shares its name in another function or comes first in the file
(issue 24, pattern 11). Conversion only: each test converts one short script in memory."""

from __future__ import annotations

import json
import textwrap

from migrate import migrate_source
from migrate.records import FileResult

EVALUATE = """\
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, test_set):
    loader = DataLoader(test_set, batch_size=1000)
    hits = 0
    with torch.no_grad():
        for x, y in loader:
            hits += (model(x).argmax(1) == y).sum().item()
    return hits


def fit(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


"""

LITERAL = EVALUATE + """\
train_set = TensorDataset(torch.randn(128, 6), torch.randint(0, 2, (128,)))
test_set = TensorDataset(torch.randn(32, 6), torch.randint(0, 2, (32,)))
loader = DataLoader(train_set, batch_size=64, shuffle=True)
model = nn.Linear(6, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    fit(model, loader, optimizer)
    print(epoch, evaluate(model, test_set))
"""

FROM_ARGUMENTS = EVALUATE + """\
parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=48)
args = parser.parse_args()
train_set = TensorDataset(torch.randn(128, 6), torch.randint(0, 2, (128,)))
test_set = TensorDataset(torch.randn(32, 6), torch.randint(0, 2, (32,)))
loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
model = nn.Linear(6, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    fit(model, loader, optimizer)
    print(epoch, evaluate(model, test_set))
"""

# the evaluation loader is the module's `loader`; training gets its own as `train_loader`, which
# fit() calls `loader` too
MODULE_EVAL_LOADER = EVALUATE.replace("def evaluate(model, test_set):\n    loader = DataLoader(test_set, batch_size=1000)\n",
                                      "def evaluate(model, loader):\n") + """\
train_set = TensorDataset(torch.randn(128, 6), torch.randint(0, 2, (128,)))
test_set = TensorDataset(torch.randn(32, 6), torch.randint(0, 2, (32,)))
loader = DataLoader(test_set, batch_size=1000)
train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
model = nn.Linear(6, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    fit(model, train_loader, optimizer)
    print(epoch, evaluate(model, loader))
"""


def convert(code: str) -> tuple[FileResult, dict[str, object]]:
    result = migrate_source(textwrap.dedent(code), "deepspeed")
    [config] = [a for a in result.artifacts if a.path.endswith("ds_config.json")]
    return result, json.loads(config.text)


def test_an_evaluation_loader_of_the_same_name_written_first_is_not_the_micro_batch() -> None:
    result, config = convert(LITERAL)
    assert config["train_micro_batch_size_per_gpu"] == 64
    assert "train_micro_batch_size_per_gpu\"] =" not in result.new  # a literal: the JSON says it already
    assert not [f for f in result.findings if f.code == "MIG116"]


def test_the_training_batch_from_argparse_wins_over_an_evaluation_literal() -> None:
    result, config = convert(FROM_ARGUMENTS)
    assert config["train_micro_batch_size_per_gpu"] == 48  # the argument's default
    assert 'ds_config["train_micro_batch_size_per_gpu"] = args.batch_size\n' in result.new


def test_a_module_level_evaluation_loader_named_like_the_training_parameter_is_not_the_micro_batch() -> None:
    _result, config = convert(MODULE_EVAL_LOADER)
    assert config["train_micro_batch_size_per_gpu"] == 16


MADE_ELSEWHERE = """\
import argparse

import torch
import torch.nn as nn

from data import make_loader


def train(model, optimizer, train_loader, epochs):
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=24)
    args = parser.parse_args()
    model = nn.Linear(4, 1).to("cuda" if torch.cuda.is_available() else "cpu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = make_loader("train.csv", batch_size=args.batch_size, shuffle=True)
    train(model, optimizer, loader, 2)


if __name__ == "__main__":
    main()
"""


def test_a_loader_made_by_another_module_s_helper_gives_its_batch_size_through_the_caller() -> None:
    """`make_loader(..., batch_size=args.batch_size)` (a module the conversion does not hold),
    handed to `train(model, optimizer, train_loader, ...)`, whose loop feeds the backward."""
    result, config = convert(MADE_ELSEWHERE)
    assert config["train_micro_batch_size_per_gpu"] == 24
    assert 'ds_config["train_micro_batch_size_per_gpu"] = args.batch_size\n' in result.new


HELPER_MODULE = """\
from torch.utils.data import DataLoader, TensorDataset


def make_loader(features, targets, batch_size=4, shuffle=True):
    return DataLoader(TensorDataset(features, targets), batch_size=batch_size, shuffle=shuffle)


if __name__ == "__main__":
    print("a demo of its own: the helper module runs as a script too")
"""

MADE_BY_A_JOINED_HELPER = MADE_ELSEWHERE.replace(
    '    loader = make_loader("train.csv", batch_size=args.batch_size, shuffle=True)\n',
    "    features, targets = torch.randn(64, 4), torch.randn(64, 1)\n"
    "    loader = make_loader(features, targets, batch_size=args.batch_size)\n"
    "    held_out = make_loader(features[:8], targets[:8], batch_size=2, shuffle=False)\n")


def test_a_helper_joined_with_the_script_gives_the_batch_size_its_training_caller_hands_it() -> None:
    """data.py (with a `__main__` demo of its own) is converted with the script: its DataLoader's
    `batch_size=batch_size` is the parameter, which two calls hand; the micro-batch is the one of
    the call whose loader the step loop iterates, never the held-out loader's 2."""
    files = {"/p/data.py": HELPER_MODULE}
    result = migrate_source(MADE_BY_A_JOINED_HELPER, "deepspeed", path="/p/train.py", read_module=files.get)
    [config] = [json.loads(a.text) for a in result.artifacts if a.path.endswith("ds_config.json")]
    assert config["train_micro_batch_size_per_gpu"] == 24
    assert 'ds_config["train_micro_batch_size_per_gpu"] = args.batch_size\n' in result.new
    assert not [f for f in result.findings if f.code == "MIG116"]
    [data] = result.modules
    assert "sampler=DistributedSampler(" in data.new and data.new.endswith(HELPER_MODULE[HELPER_MODULE.index("if __name__"):])


def test_a_helper_of_the_script_called_once_gives_the_batch_size_its_caller_hands_it() -> None:
    code = MADE_BY_A_JOINED_HELPER.replace("from data import make_loader\n", HELPER_MODULE.split("\n\n\nif")[0] + "\n")
    code = code.replace("    held_out = make_loader(features[:8], targets[:8], batch_size=2, shuffle=False)\n", "")
    code = code.replace("make_loader(features, targets, batch_size=args.batch_size)", "make_loader(features, targets, args.batch_size)")
    result, config = convert(code)
    assert config["train_micro_batch_size_per_gpu"] == 24
    assert 'ds_config["train_micro_batch_size_per_gpu"] = args.batch_size\n' in result.new
