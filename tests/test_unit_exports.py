"""A download unit is blocked (MIG120) only by a name it binds that a statement outside it reads:
a name bound and read inside the unit (`url = BACKUP` in the handler, read by the retry there), or
bound again outside without being read, is no export; and the finding quotes the reader's code,
never the comment lines above it."""

from __future__ import annotations

from migrate import migrate_source

HEAD = '''import zipfile

import requests
import torch

PRIMARY = "https://example.org/a.zip"
BACKUP = "https://mirror.example.org/a.zip"


def fetch(url, zip_path, out_dir):
    reply = requests.get(url, timeout=30)
    with open(zip_path, "wb") as handle:
        handle.write(reply.content)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(out_dir)


url = PRIMARY
try:
    fetch(url, "a.zip", "data")
except requests.exceptions.RequestException:
    url = BACKUP
    fetch(url, "a.zip", "data")
'''
TRAIN = '''model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = model(torch.ones(2, 3)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _convert(between: str):  # type: ignore[no-untyped-def]
    return migrate_source(HEAD + between + TRAIN, "ddp", path="/w/train.py")


def test_a_name_bound_and_read_only_inside_the_unit_does_not_block_it() -> None:
    result = _convert("########################################\n# the table\n########################################\n")
    assert not [f for f in result.findings if f.code == "MIG120"]
    assert "if local_rank == 0:\n    try:\n        fetch(url" in result.new
    assert "        url = BACKUP\n        fetch(url" in result.new
    assert result.new.index("dist.barrier()  # one download per node") < result.new.index("model = torch.nn.Linear")


def test_a_name_bound_again_outside_without_a_read_is_no_export() -> None:
    result = _convert("url = None\n")
    assert not [f for f in result.findings if f.code == "MIG120"]
    assert "if local_rank == 0:\n    try:" in result.new


def test_a_real_export_is_named_by_its_code_not_its_comments() -> None:
    result = _convert("########################################\n# where it came from\nprint(url)\n")
    [finding] = [f for f in result.findings if f.code == "MIG120"]
    assert "binds `url`, which `print(url)` reads on every rank" in finding.message
    assert "#" not in finding.message.split("reads on every rank")[0]
    assert "if local_rank == 0:\n    try:" not in result.new
