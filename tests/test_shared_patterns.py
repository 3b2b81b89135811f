"""Shapes met in real scripts (issue 24): directories every rank makes, collectives only some
ranks reach, functional data_parallel under FSDP and Horovod, channels_last under Horovod, and
where Horovod's `synchronize()` goes. Conversion only: each test converts a small script."""

from __future__ import annotations

import pytest

from migrate import migrate_source

HEAD = """\
import argparse
import os
import time
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="out")
    args = parser.parse_args()
"""
TRAIN = """
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""


def convert(body: str, target: str = "ddp", head: str = HEAD, train: str = TRAIN):  # type: ignore[no-untyped-def]
    return migrate_source(head + body + train, target, path="train.py")


def codes(result) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    return [(f.line, f.code) for f in result.findings]


# -- 1. directories ------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["ddp", "fsdp", "horovod", "deepspeed"])
def test_path_mkdir_without_exist_ok_tolerates_the_directory_another_rank_made(target: str) -> None:
    new = convert("    Path(args.out).mkdir(parents=True)\n    (Path(args.out) / 'a').mkdir(exist_ok=False)\n", target).new
    assert "Path(args.out).mkdir(parents=True, exist_ok=True)" in new
    assert "(Path(args.out) / 'a').mkdir(exist_ok=True)" in new


def test_makedirs_with_exist_ok_false_becomes_true() -> None:
    new = convert("    os.makedirs(args.out, exist_ok=False)\n    os.mkdir(args.out + '2')\n    os.makedirs('c', 0o755, False)\n").new
    assert "os.makedirs(args.out, exist_ok=True)" in new
    assert "os.makedirs('c', 0o755, True)" in new
    assert "os.makedirs(args.out + '2', exist_ok=True)" in new


def test_a_folder_named_after_the_clock_is_made_on_rank_zero_then_the_others_wait() -> None:
    new = convert("    run = Path(args.out) / time.strftime('%H%M%S')\n    run.mkdir()\n").new
    assert "    if dist.get_rank() == 0:\n        run.mkdir()\n    dist.barrier()" in new


def test_a_handler_the_script_relies_on_runs_on_rank_zero_then_the_others_wait() -> None:
    body = "    try:\n        os.mkdir(args.out)\n    except FileExistsError:\n        raise SystemExit('exists')\n"
    new = convert(body).new
    assert "    if dist.get_rank() == 0:\n        try:\n            os.mkdir(args.out)\n" in new
    assert "raise SystemExit('exists')\n    dist.barrier()" in new


def test_a_handler_that_binds_a_name_is_reported_with_its_line() -> None:
    body = "    resume = False\n    try:\n        os.mkdir(args.out)\n    except FileExistsError:\n        resume = True\n"
    result = convert(body)
    assert (16, "MIG120") in codes(result)  # the `try:`
    assert "    try:\n        os.mkdir(args.out)\n" in result.new  # left as it was


def test_a_handler_that_only_passes_is_left_alone() -> None:
    result = convert("    try:\n        os.mkdir(args.out)\n    except OSError:\n        pass\n")
    assert "    try:\n        os.mkdir(args.out)\n    except OSError:\n        pass\n" in result.new
    assert "MIG120" not in [c for _line, c in codes(result)]


# -- 2. collectives only some ranks reach ---------------------------------------------------------

DATASET = """\
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets


class Digits(Dataset):
    def __init__(self, root):
        self.base = datasets.MNIST(root, download=True)

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        return self.base[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    loader = DataLoader(Digits("data"), batch_size=8, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
{tail}

if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("tail", [
    "    if args.local_rank in (-1, 0):\n        print(len(Digits('data')))\n",  # the script's own rank check
    "    print(len(Digits('data')))\n",  # a print the conversion puts on rank 0
])
@pytest.mark.parametrize("target", ["ddp", "horovod"])
def test_no_barrier_in_a_constructor_some_ranks_call_more_often(tail: str, target: str) -> None:
    result = migrate_source(DATASET.format(tail=tail), target, path="train.py")
    init = result.new.split("def __len__")[0]
    assert "barrier" not in init
    assert (11, "MIG120") in codes(result)


def test_a_constructor_every_rank_calls_alike_still_downloads_once_per_node() -> None:
    result = migrate_source(DATASET.format(tail=""), "ddp", path="train.py")
    assert "dist.barrier()\n        self.base = datasets.MNIST(root, download=False)" in result.new  # the files are there


def test_a_download_under_a_local_rank_test_gets_no_barrier() -> None:
    script = DATASET.format(tail="").replace(
        '    loader = DataLoader(Digits("data")',
        '    if args.local_rank <= 0:\n        datasets.MNIST("data", download=True)\n    loader = DataLoader(Digits("data")')
    result = migrate_source(script, "ddp", path="train.py")
    assert "    if args.local_rank <= 0:\n        datasets.MNIST" in result.new
    assert (25, "MIG120") in codes(result)


HOROVOD_CLASS = """\
import argparse

import torch
import torch.nn as nn


class Trainer:
    def __init__(self):
        self.model = nn.Linear(4, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def step(self, x):
        loss = self.model(x).sum()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    args = parser.parse_args()
    trainer = Trainer() if args.local_rank == 0 else None
    if args.local_rank == 0:
        trainer = Trainer()
    for _ in range(3):
        trainer.step(torch.randn(8, 4))


if __name__ == "__main__":
    main()
"""


def test_horovod_refuses_a_broadcast_in_a_class_built_on_some_ranks_only() -> None:
    result = migrate_source(HOROVOD_CLASS, "horovod", path="train.py")
    assert result.new == HOROVOD_CLASS
    assert [c for _line, c in codes(result)] == ["MIG406"]


# -- 3. functional data_parallel -----------------------------------------------------------------

@pytest.mark.parametrize("target", ["fsdp", "horovod"])
def test_functional_data_parallel_runs_as_a_plain_call(target: str) -> None:
    # the model is also called by name (one GPU), as scripts that offer `--ngpu` do
    train = TRAIN.replace("model(x)", "nn.parallel.data_parallel(model, x, range(2)) if args.out else model(x)")
    result = convert("", target, train=train)
    assert "mse_loss(model(x) if args.out else model(x), y)" in result.new and "data_parallel" not in result.new
    assert "MIG003" in [c for _line, c in codes(result)]


# -- 4. channels_last under Horovod --------------------------------------------------------------

def test_horovod_refuses_a_channels_last_model_naming_the_line() -> None:
    train = TRAIN.replace("    optimizer = torch.optim", "    model = model.to(memory_format=torch.channels_last)\n    optimizer = torch.optim", 1)
    result = convert("", "horovod", train=train)
    assert result.new == HEAD + train
    assert codes(result) == [(19, "MIG406")]


def test_horovod_keeps_channels_last_inputs() -> None:
    train = TRAIN.replace("            loss =", "            x = x.to(memory_format=torch.channels_last)\n            loss =", 1)
    result = convert("", "horovod", train=train)
    assert "hvd.DistributedOptimizer" in result.new and "MIG406" not in [c for _line, c in codes(result)]


# -- 5. where Horovod synchronizes ----------------------------------------------------------------

def test_a_step_on_the_backwards_line_needs_no_extra_synchronize() -> None:
    train = TRAIN.replace("            loss.backward()\n            optimizer.step()\n", "            loss.backward(); optimizer.step()\n")
    result = convert("", "horovod", train=train)
    assert "synchronize" not in result.new
    assert "MIG404" not in [c for _line, c in codes(result)]


CLIP_HELPER = "def clip(model):\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n\n\n"


def test_a_clip_in_a_helper_is_synchronized_first() -> None:
    train = TRAIN.replace("            optimizer.step()\n", "            clip(model)\n            optimizer.step()\n")
    new = convert("", "horovod", head=HEAD.replace("def main", CLIP_HELPER + "def main"), train=train).new
    assert ("            optimizer.synchronize()  # average the gradients across ranks before they are read\n"
            "            clip(model)\n            with optimizer.skip_synchronize():\n                optimizer.step()\n") in new


def test_a_clip_before_a_step_in_each_branch_synchronizes_once_and_skips_both() -> None:
    train = TRAIN.replace("            optimizer.step()\n", "            clip(model)\n            if epoch:\n                optimizer.step()\n"
                          "            else:\n                optimizer.step()\n")
    new = convert("", "horovod", head=HEAD.replace("def main", CLIP_HELPER + "def main"), train=train).new
    assert new.count("optimizer.synchronize()") == 1
    assert new.count("with optimizer.skip_synchronize():") == 2
