"""No barrier under a test of the filesystem (steps/shared_files.py).

`if not os.path.exists(p):` is read at a different moment on each rank: a rank that tests after
rank 0 has written `p` skips the block, and a barrier inside it waits forever. Each edit that
places a barrier puts it outside the outermost such `if` (the whole `if` on rank 0, or the
download moved above it with the tests that lead to it), or reports MIG120 at the `if`.
Conversion only: each test converts a small script."""

from __future__ import annotations

import ast

import pytest

from migrate import migrate_source

HEAD = """\
import argparse
import os
import shutil

import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data")
    parser.add_argument("--out", default="out")
    args = parser.parse_args()
    root = args.data
"""
TRAIN = """\
    loader = DataLoader(train_set, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""
LOOP = """\
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""
CACHED = """\
    if not os.path.exists(root):
        train_set = torchvision.datasets.MNIST(root, download=True, transform=torchvision.transforms.ToTensor())
    else:
        train_set = torchvision.datasets.MNIST(root, transform=torchvision.transforms.ToTensor())
"""
PLAIN_DATA = "    train_set = torchvision.datasets.MNIST(root, transform=torchvision.transforms.ToTensor())\n"
FILESYSTEM_TESTS = frozenset({"exists", "isdir", "isfile"})


def convert(data: str = CACHED, files: str = "", target: str = "ddp"):  # type: ignore[no-untyped-def]
    return migrate_source(HEAD + data + TRAIN + files + LOOP, target, path="train.py")


def _reads_filesystem(test: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in FILESYSTEM_TESTS
               for n in ast.walk(test))


def barriers_under_filesystem_tests(text: str) -> list[int]:
    """Lines of the `barrier()` calls that stand in an `if` whose test reads the filesystem."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.If) and _reads_filesystem(node.test):
            for inner in [*node.body, *node.orelse]:
                found += [n.lineno for n in ast.walk(inner) if isinstance(n, ast.Call)
                          and isinstance(n.func, ast.Attribute) and n.func.attr == "barrier"]
    return found


def mig120_lines(result) -> list[int]:  # type: ignore[no-untyped-def]
    return [f.line for f in result.findings if f.code == "MIG120"]


def line_of(text: str, code: str) -> int:
    return text.splitlines().index(code) + 1


@pytest.mark.parametrize("target", ["ddp", "horovod", "deepspeed"])
def test_a_download_under_an_exists_test_moves_above_it_with_that_test(target: str) -> None:
    result = convert(target=target)
    new = result.new
    assert barriers_under_filesystem_tests(new) == []
    moved = new.index("if local_rank == 0 and not os.path.exists(root):")
    assert new.index("    torchvision.datasets.MNIST(root, download=True)\n", moved) < new.index("barrier()", moved) \
        < new.index("    if not os.path.exists(root):\n", moved)
    assert mig120_lines(result) == []


def test_a_download_in_the_else_branch_is_moved_up_under_the_negated_test() -> None:
    data = ("    if os.path.isdir(root):\n"
            "        train_set = torchvision.datasets.MNIST(root, transform=torchvision.transforms.ToTensor())\n"
            "    else:\n"
            "        train_set = torchvision.datasets.MNIST(root, download=True, transform=torchvision.transforms.ToTensor())\n")
    new = convert(data).new
    assert barriers_under_filesystem_tests(new) == []
    assert "    if local_rank == 0 and not os.path.isdir(root):  # one download per node" in new


def test_a_download_that_reads_a_name_bound_inside_the_test_is_reported_at_the_if() -> None:
    data = CACHED.replace("        train_set = torchvision.datasets.MNIST(root, download=True",
                          "        where = root + '/mnist'\n        train_set = torchvision.datasets.MNIST(where, download=True")
    result = convert(data)
    assert barriers_under_filesystem_tests(result.new) == []
    assert mig120_lines(result) == [line_of(HEAD + data, "    if not os.path.exists(root):")]


def test_a_directory_made_under_a_handler_runs_with_its_whole_if_on_rank_zero_then_a_barrier() -> None:
    files = ("    if not os.path.isdir(args.out):\n        try:\n            os.mkdir(args.out)\n"
             "        except FileExistsError:\n            print('found', args.out)\n")
    result = convert(PLAIN_DATA, files)
    new = result.new
    assert barriers_under_filesystem_tests(new) == []
    assert ("    if dist.get_rank() == 0:\n        if not os.path.isdir(args.out):\n            try:\n"
            "                os.mkdir(args.out)\n            except FileExistsError:\n"
            "                print('found', args.out)\n"
            "    dist.barrier()  # the other ranks wait for the directory rank 0 made\n") in new
    assert mig120_lines(result) == []


def test_a_clean_up_under_an_exists_test_runs_with_its_whole_if_on_rank_zero_then_a_barrier() -> None:
    files = ("    if os.path.exists(args.out):\n        print('cleaning', args.out)\n        shutil.rmtree(args.out)\n"
             "        os.makedirs(args.out)\n")
    new = convert(PLAIN_DATA, files, target="horovod").new
    assert barriers_under_filesystem_tests(new) == []
    assert ("    if hvd.rank() == 0:\n        if os.path.exists(args.out):\n            print('cleaning', args.out)\n"
            "            shutil.rmtree(args.out)\n            os.makedirs(args.out)\n"
            "    hvd.barrier()  # the other ranks wait for the directories rank 0 made\n") in new


def test_an_if_that_binds_a_name_read_below_is_not_moved_and_is_reported_at_its_line() -> None:
    files = ("    if not os.path.isdir(args.out):\n        try:\n            os.mkdir(args.out)\n"
             "        except FileExistsError:\n            print('found', args.out)\n        made = True\n"
             "    else:\n        made = False\n    print(made)\n")
    result = convert(PLAIN_DATA, files)
    assert barriers_under_filesystem_tests(result.new) == []
    assert mig120_lines(result) == [line_of(HEAD + PLAIN_DATA + TRAIN + files, "    if not os.path.isdir(args.out):")]
    message = next(f.message for f in result.findings if f.code == "MIG120")
    assert "`if not os.path.isdir(args.out)`" in message and "binds `made`" in message


def test_a_load_under_an_exists_test_waits_above_that_test() -> None:
    files = ("    torch.save(model.state_dict(), 'warm.pt')\n"
             "    if os.path.exists('warm.pt'):\n        model.load_state_dict(torch.load('warm.pt'))\n")
    result = convert(PLAIN_DATA, files)
    new = result.new
    assert barriers_under_filesystem_tests(new) == []
    assert ("    dist.barrier()  # rank 0 has finished writing 'warm.pt'\n    if os.path.exists('warm.pt'):\n") in new
    assert mig120_lines(result) == []


@pytest.mark.parametrize("target", ["ddp", "horovod", "deepspeed"])
def test_a_save_and_load_inside_one_exists_test_is_reported_at_the_if(target: str) -> None:
    files = ("    ckpt = os.path.join(args.out, 'init.pt')\n    if not os.path.exists(ckpt):\n"
             "        torch.save(model.state_dict(), ckpt)\n        model.load_state_dict(torch.load(ckpt))\n")
    result = convert(PLAIN_DATA, files, target=target)
    assert barriers_under_filesystem_tests(result.new) == []
    assert mig120_lines(result) == [line_of(HEAD + PLAIN_DATA + TRAIN + files, "    if not os.path.exists(ckpt):")]
    message = next(f.message for f in result.findings if f.code == "MIG120")
    assert "`if not os.path.exists(ckpt)`" in message and "test the file once on every rank" in message


CACHE_AND_CHECKPOINT = """\
import os

import torch
import torch.nn as nn


def model_save(fn):
    with open(fn, "wb") as f:
        torch.save(model.state_dict(), f)


fn = "cache.pt"
if os.path.exists(fn):
    data = torch.load(fn)
else:
    data = torch.randn(64, 4)
    torch.save(data, fn)

model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data, torch.randn(64, 2)), batch_size=8)
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    model_save("best.pt")
"""


def test_a_cache_read_before_its_own_write_waits_for_no_other_function_s_save_of_a_name_spelled_alike() -> None:
    """`fn` of `model_save(fn)` and the module's `fn` are two names: the module's read comes before
    the only write of its file, so no barrier "rank 0 has finished writing fn" goes above it."""
    new = migrate_source(CACHE_AND_CHECKPOINT, "ddp", path="lm.py").new
    assert "if dist.get_rank() == 0:\n        torch.save(data, fn)" in new
    assert "finished writing fn" not in new
