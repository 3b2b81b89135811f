"""A script's own download as one unit on one process per node, then a barrier (steps/download_units.py,
steps/shared_files.py); PIL images saved where they are made (steps/rank_zero.py); a
check-then-create directory. Conversion only: each test converts a small script."""

from __future__ import annotations

import pytest

from migrate import migrate_source

HEAD = """\
import os
import zipfile
import requests
import torch
import torch.nn as nn


def fetch(url, zip_path, out):
    r = requests.get(url)
    with open(zip_path, "wb") as f:
        f.write(r.content)
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(out)
    os.rename(os.path.join(out, "raw"), os.path.join(out, "ready"))


def main():
"""
TRAIN = """
    x = torch.load("d/ready/x.pt")
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


def convert(body: str, target: str = "ddp", head: str = HEAD):  # type: ignore[no-untyped-def]
    return migrate_source(head + body + TRAIN, target, path="train.py")


def function(new: str, name: str) -> str:
    """The text of one top-level function of the output."""
    start = new.index(f"def {name}(")
    end = new.find("\ndef ", start + 1)
    return new[start:end if end != -1 else None]


def codes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.code for f in result.findings]


# -- 1. the download helper ------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["ddp", "fsdp", "horovod", "deepspeed"])
def test_the_exists_block_calling_the_helper_runs_on_local_rank_zero_then_every_rank_waits(target: str) -> None:
    result = convert('    if not os.path.exists("d/ready"):\n        fetch("https://h/d.zip", "d.zip", "d")\n', target)
    new = result.new
    guard = new.index("== 0:\n        if not os.path.exists(\"d/ready\"):\n            fetch(")
    assert "local_rank" in new[guard - 40:guard].lower() or "LOCAL_RANK" in new[guard - 60:guard]
    barrier = new.index("barrier()", guard)
    assert barrier < new.index('torch.load("d/ready/x.pt"')
    assert "MIG120" not in codes(result)


def test_the_helper_keeps_its_writes_whole_inside_the_unit() -> None:
    new = convert('    fetch("https://h/d.zip", "d.zip", "d")\n').new
    helper = function(new, "fetch")
    assert "get_rank" not in helper and "rank()" not in helper  # no rank-0 guard on its write or rename alone
    assert "if local_rank == 0:\n        fetch(" in new
    assert "    dist.barrier()  # one download per node" in new


def test_a_helper_whose_result_is_read_below_is_left_with_a_finding() -> None:
    head = HEAD.replace("    os.rename(", "    return out\n    os.rename(")
    result = convert('    root = fetch("https://h/d.zip", "d.zip", "d")\n    print(root)\n', head=head)
    assert "MIG120" in codes(result)
    message = next(f.message for f in result.findings if f.code == "MIG120")
    assert "binds `root`" in message
    assert "if local_rank == 0:\n        root = fetch(" not in result.new
    assert "get_rank" not in function(result.new, "fetch")  # left whole on every rank, with MIG120


def test_a_download_under_a_condition_that_differs_per_rank_gets_a_finding_and_no_barrier() -> None:
    body = '    if torch.rand(1).item() > 0.5:\n        fetch("https://h/d.zip", "d.zip", "d")\n'
    result = convert(body)
    assert "MIG120" in codes(result)
    assert "one download per node" not in result.new


def test_urlretrieve_and_the_unpacking_after_it_are_one_unit() -> None:
    head = HEAD.split("\n\ndef fetch")[0] + "\nimport urllib.request\n\n\ndef main():\n"
    body = ('    urllib.request.urlretrieve("https://h/d.zip", "d.zip")\n'
            '    with zipfile.ZipFile("d.zip") as z:\n        z.extractall("d")\n')
    new = convert(body, head=head).new
    unit = new.index("if local_rank == 0:\n        urllib.request.urlretrieve(")
    assert new.index('        with zipfile.ZipFile("d.zip") as z:') > unit
    assert new.index("dist.barrier()  # one download per node") > new.index('z.extractall("d")')


def test_a_second_conversion_changes_nothing() -> None:
    new = convert('    if not os.path.exists("d/ready"):\n        fetch("https://h/d.zip", "d.zip", "d")\n').new
    assert migrate_source(new, "ddp", path="train.py").new == new


# -- 2. PIL images saved where they are made ------------------------------------------------------

PIL_HEAD = "from PIL import Image\n" + HEAD


@pytest.mark.parametrize("line", [
    'Image.fromarray(x.numpy()).save("out/a.png")',
    'Image.open("in.png").convert("L").save("out/b.png")',
    'Image.new("RGB", (4, 4)).save("out/c.png")',
])
def test_a_chained_pil_save_runs_on_rank_zero(line: str) -> None:
    new = convert(f"    {line}\n", head=PIL_HEAD).new
    assert f"    if dist.get_rank() == 0:\n        {line}\n" in new


def test_a_save_on_a_name_bound_to_a_chained_image_runs_on_rank_zero() -> None:
    body = '    img = Image.open("in.png").convert("L")\n    img.save("out/b.png")\n'
    new = convert(body, head=PIL_HEAD).new
    assert '    if dist.get_rank() == 0:\n        img.save("out/b.png")\n' in new


def test_save_of_something_else_chained_is_left_alone() -> None:
    new = convert('    torch.jit.script(nn.Linear(2, 2)).save("m.pt")\n', head=PIL_HEAD).new
    assert '    torch.jit.script(nn.Linear(2, 2)).save("m.pt")\n' in new
    assert 'if dist.get_rank() == 0:\n        torch.jit.script' not in new


# -- 3. check-then-create, in the script itself -----------------------------------------------------

def test_check_then_mkdir_tolerates_the_directory_another_rank_made() -> None:
    new = convert('    if not os.path.exists("runs"):\n        os.mkdir("runs")\n').new
    assert 'if not os.path.exists("runs"):\n        os.makedirs("runs", exist_ok=True)' in new
