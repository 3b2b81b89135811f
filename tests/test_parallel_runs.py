"""Folder runs a person can watch: `-j N` converts in N processes and prints exactly what `-j 1`
prints (stdout, stderr, exit status), over samples/ and over a folder of 30 files made here (small
training scripts, a file that does not train, one that does not parse); the progress line and the
diff's colours only on a terminal (never when piped, as here, nor with NO_COLOR or --quiet); the
closing summary table. In this process (the pool forks it); conversion only."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from migrate.cli import run
from migrate import DdpOptions
from migrate.targets import targets

ROOT = Path(__file__).resolve().parent.parent
TINY = """import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, {n})
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, {n})), batch_size=4, shuffle={shuffle})
for epoch in range(2):
    for x, y in loader:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
"""


def thirty(folder: Path) -> Path:
    """30 files: 27 small training scripts, one that does not train, one that does not parse, one
    already distributed."""
    folder.mkdir()
    for n in range(27):
        (folder / f"train_{n:02d}.py").write_text(TINY.format(n=n + 1, shuffle=n % 2 == 0))
    (folder / "helpers.py").write_text("def norm(x):\n    return x / x.norm()\n")
    (folder / "broken.py").write_text("import torch\nloss.backward(\n")
    (folder / "ddp.py").write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\nloss.backward()\n")
    return folder


def both(capfd: pytest.CaptureFixture[bytes], folder: str, target: str = "ddp") -> list[tuple[int, bytes, bytes]]:
    """(status, stdout, stderr) of the run at -j 1 and at -j 2."""
    outcomes = []
    options = targets()[target].options_class()
    for jobs in (1, 2):
        status = run(target, [folder], options, write=False, check=False, report="text", jobs=jobs)
        captured = capfd.readouterr()
        outcomes.append((status, captured.out, captured.err))
    return outcomes


def test_two_jobs_print_what_one_job_prints_over_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    monkeypatch.chdir(tmp_path)
    one, two = both(capfdbinary, "samples")
    assert one == two and one[0] == 0 and one[1].count(b"diff --git") >= 16


def test_two_jobs_print_what_one_job_prints_over_thirty_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    thirty(tmp_path / "many")
    monkeypatch.chdir(tmp_path)
    one, two = both(capfdbinary, "many")
    assert one == two
    status, out, err = one
    assert status == 2 and out.count(b"diff --git a/many/train_") == out.count(b"diff --git a/many/run_train_") == 27
    assert b"many/broken.py:2:" in err and b"\x1b" not in out + err and b"\r" not in err
    table = err.decode().split("migrate: summary\n")[1]
    assert [line.split() for line in table.splitlines()] == [
        ["changed", "27"], ["unchanged", "2"], ["errors", "1"], ["findings", "MIG001", "1"], ["findings", "MIG002", "1"]]


class Terminal(io.StringIO):
    """A stream that says it is a terminal, with a byte buffer for stdout's diff."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer = io.BytesIO()

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("quiet, no_color, report, shown", [(False, False, "text", True), (True, False, "text", False),
                                                            (False, True, "text", False), (False, False, "json", False)])
def test_progress_and_colour_only_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet: bool,
                                                no_color: bool, report: str, shown: bool) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    for n in (1, 2):
        (folder / f"t{n}.py").write_text(TINY.format(n=n, shuffle=True))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    if no_color:
        monkeypatch.setenv("NO_COLOR", "")
    out, err = Terminal(), Terminal()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    assert run("ddp", ["two"], DdpOptions(), write=False, check=False, report=report, jobs=1, quiet=quiet) == 0
    assert ("\rmigrate: 2/2 files\x1b[K" in err.getvalue()) is shown
    coloured = b"\x1b[32m+import os\x1b[m\n" in out.buffer.getvalue()
    assert coloured is (not no_color)
    assert ("migrate: summary" in err.getvalue()) is (report == "text" and not quiet)
