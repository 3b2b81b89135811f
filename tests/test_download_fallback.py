"""A download with a fallback (`try: fetch(URL) except ...: fetch(MIRROR)`) is one unit with the
filesystem `if` around it and the file handling after it, on one process per node, then a barrier;
a helper one of whose calls cannot move is left whole on every rank, with MIG120
(steps/download_units.py, steps/shared_files.py). Conversion only, but for the last test, which
runs the converted golden case on two ranks with file:// addresses (marked full)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from migrate import migrate_source
from tests import progress

HEAD = """\
import os
import zipfile
from pathlib import Path

import requests
import torch
import torch.nn as nn

URL = "https://example.org/a.zip"
BACKUP = "https://mirror.example.org/a.zip"
OUT = Path("data/ready")


def fetch(url, zp, out):
    if out.exists():
        return
    r = requests.get(url)
    with open(zp, "wb") as f:
        f.write(r.content)
    zipfile.ZipFile(zp).extractall("d")
    os.rename("d/raw", out)


def make_csvs(out):
    with open(out / "x.csv") as f:
        rows = f.read().splitlines()
    with open("train.csv", "w") as f:
        f.write("\\n".join(rows[1:]))


def main():
"""
TRAIN = """\
    x = torch.tensor([[float(v) for v in line.split(",")] for line in open("train.csv")])
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(x, batch_size=8, shuffle=True)
    for epoch in range(2):
        for xb in loader:
            optimizer.zero_grad()
            loss = model(xb).pow(2).mean()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""
FALLBACK = """\
        try:
            fetch(URL, "a.zip", OUT)
        except requests.RequestException:
            fetch(BACKUP, "a.zip", OUT)
        make_csvs(OUT)
"""
TARGETS = ["ddp", "fsdp", "horovod", "deepspeed"]


def convert(body: str, target: str = "ddp", head: str = HEAD):  # type: ignore[no-untyped-def]
    return migrate_source(head + body + TRAIN, target, path="train.py")


def function(new: str, name: str) -> str:
    start = new.index(f"def {name}(")
    end = new.find("\ndef ", start + 1)
    return new[start:end if end != -1 else None]


def indented(text: str, by: str) -> str:
    return "".join(by + line if line.strip() else line for line in text.splitlines(keepends=True))


def mig120(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.message for f in result.findings if f.code == "MIG120"]


def rank_guards(text: str) -> bool:
    return "get_rank()" in text or "hvd.rank()" in text


# -- one unit: the filesystem `if`, its try/except, the file handling after the download ------------

@pytest.mark.parametrize("target", TARGETS)
def test_the_if_named_by_a_filesystem_test_runs_whole_on_local_rank_zero(target: str) -> None:
    body = '    have_all = all(Path(n).exists() for n in ["train.csv"])\n    if not have_all:\n' + FALLBACK
    result = convert(body, target)
    new = result.new
    unit = "    if local_rank == 0:\n        if not have_all:\n" + indented(FALLBACK, "    ")
    assert unit in new, new
    after = new.index(unit) + len(unit)
    assert new[after:].lstrip().startswith(("dist.barrier()", "hvd.barrier()"))
    assert not rank_guards(function(new, "fetch")) and not rank_guards(function(new, "make_csvs"))
    assert mig120(result) == []


@pytest.mark.parametrize("target", ["ddp", "horovod", "deepspeed"])
def test_the_if_that_tests_the_filesystem_itself_takes_the_file_function_whole(target: str) -> None:
    # before: make_csvs wrote train.csv on global rank 0 only, inside a unit run by each node's local rank 0
    body = '    if not all(Path(n).exists() for n in ["train.csv"]):\n' + FALLBACK
    new = convert(body, target).new
    assert "    if local_rank == 0:\n        if not all(Path(n)" in new
    assert not rank_guards(function(new, "make_csvs"))


def test_a_try_that_downloads_again_in_its_handler_is_one_unit_with_what_follows() -> None:
    fallback = FALLBACK.replace("\n    ", "\n").removeprefix("    ")
    result = convert(fallback)
    new = result.new
    unit = "    if local_rank == 0:\n" + indented(fallback, "    ")
    assert unit in new, new
    assert new[new.index(unit) + len(unit):].lstrip().startswith("dist.barrier()  # one download per node")
    assert new.count("one download per node") == 1
    assert mig120(result) == []


def test_a_function_after_the_download_that_uses_torch_is_not_part_of_the_unit() -> None:
    head = HEAD.replace('    with open("train.csv", "w") as f:\n        f.write("\\n".join(rows[1:]))',
                        '    torch.save(torch.tensor([len(r) for r in rows]), "train.pt")')
    new = convert(FALLBACK.replace("\n    ", "\n").removeprefix("    "), head=head).new
    barrier = new.index("dist.barrier()  # one download per node")
    assert barrier < new.index("    make_csvs(OUT)")
    assert "get_rank() == 0" in function(new, "make_csvs")  # its save on rank 0, as any save


def test_a_file_function_also_called_outside_the_unit_keeps_its_guards() -> None:
    body = '    if not OUT.exists():\n' + FALLBACK + '    print("ready")\n    make_csvs(OUT)\n'
    new = convert(body).new
    assert "    if local_rank == 0:\n        if not OUT.exists():" in new
    assert "get_rank() == 0" in function(new, "make_csvs")  # the call on every rank writes on rank 0 alone


# -- a helper one of whose calls cannot move: left whole, and said -----------------------------------

@pytest.mark.parametrize("target", ["ddp", "horovod", "deepspeed"])
def test_a_helper_with_a_call_that_cannot_move_is_left_whole_with_a_finding(target: str) -> None:
    body = ('    fetch(URL, "a.zip", OUT)\n    tries = 0\n    while not OUT.exists() and tries < 3:\n'
            '        fetch(BACKUP, "a.zip", OUT)\n        tries += 1\n    make_csvs(OUT)\n')
    result = convert(body, target)
    helper = function(result.new, "fetch")
    assert helper == function(HEAD, "fetch")  # none of its writes on rank 0 alone
    assert "one download per node" not in result.new
    messages = mig120(result)
    refused = next(m for m in messages if m.startswith('`fetch(BACKUP, "a.zip", OUT)`'))
    assert "no barrier can be placed" in refused and "`fetch` is left whole on every rank" in refused
    held = next(m for m in messages if m.startswith('`fetch(URL, "a.zip", OUT)`'))
    assert '`fetch(BACKUP, "a.zip", OUT)` (line ' in held


def test_a_second_conversion_changes_nothing() -> None:
    body = '    have_all = all(Path(n).exists() for n in ["train.csv"])\n    if not have_all:\n' + FALLBACK
    once = convert(body).new
    assert migrate_source(once, "ddp", path="train.py").new == once


# -- the golden case on two ranks, the first address missing, the mirror a local archive ---------------

@pytest.mark.slow
@pytest.mark.full
def test_the_converted_case_downloads_once_per_node_and_trains_on_two_ranks(tmp_path: Path) -> None:
    case = Path(__file__).parent / "cases" / "download_with_fallback"
    shutil.copy(case / "ddp.py", tmp_path / "train.py")
    rows = "a,b,c,y\n" + "".join(f"{i},{i + 1},{i + 2},{3 * i + 3}\n" for i in range(16))
    with zipfile.ZipFile(tmp_path / "mirror.zip", "w") as packed:
        packed.writestr("rows", rows)
    env = {**os.environ, "TABLE_URL": (tmp_path / "missing.zip").as_uri(), "TABLE_MIRROR": (tmp_path / "mirror.zip").as_uri(),
           "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train.py"]
    done = progress.run_ranks(command, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("trying the mirror") == 1  # local rank 0 alone downloaded
    assert (tmp_path / "train.csv").read_text() == rows.split("\n", 1)[1]
    assert "epoch 1 loss" in done.stdout
