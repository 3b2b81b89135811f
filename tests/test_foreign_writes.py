"""A function of a module of the project that writes files and whose module ends with its own
`__main__` block: `plot_latents(model, loader, path)` from tools.py, called after each epoch with
its result unused.

- DDP hands it `model.module` (its forward joins no other rank) and runs the call on rank 0 only;
  guarding the write inside tools.py would need the process group in the module's own demo, so
  tools.py is not edited: MIG106 names the module and the write, MIG137 says why the module is kept.
- FSDP's forward of the sharded model is collective: the call stays on every rank, and tools.py is
  edited with the program (its demo needs no launcher for that edit): the write itself runs on rank
  0 only, guarded by the launcher's RANK, which a plain run of the demo does not set.
Conversion only."""

from __future__ import annotations

from pathlib import Path

from migrate.api import migrate_file
from migrate.records import FileResult

TOOLS = """\
import sys

import matplotlib.pyplot as plt
import torch


def plot_latents(model, loader, path):
    points = torch.cat([model.encode(x) for x, _ in loader])
    plt.scatter(points[:, 0], points[:, 1])
    plt.savefig(path)


if __name__ == "__main__":
    plot_latents(torch.load(sys.argv[1]), [], "latents.png")
"""

TRAIN = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from tools import plot_latents


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 2)
        self.decoder = nn.Linear(2, 4)

    def encode(self, x):
        return self.encoder(x)

    def forward(self, x):
        return self.decoder(self.encoder(x))


def main():
    data = TensorDataset(torch.randn(32, 4), torch.zeros(32))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = AutoEncoder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        for x, _ in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), x).backward()
            optimizer.step()
        with torch.no_grad():
            plot_latents(model, loader, f"latents_{epoch}.png")


if __name__ == "__main__":
    main()
"""


def converted(tmp_path: Path, target: str) -> FileResult:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "train.py").write_text(TRAIN)
    result = migrate_file(str(tmp_path / "train.py"), target)
    assert isinstance(result, FileResult), result
    return result


def test_ddp_runs_the_writing_helper_on_rank_zero_and_names_its_write(tmp_path: Path) -> None:
    result = converted(tmp_path, "ddp")
    assert '            if dist.get_rank() == 0:\n                plot_latents(model.module, loader, f"latents_{epoch}.png")\n' in result.new
    [note] = [f for f in result.findings if f.code == "MIG106"]
    assert note.message == "`plot_latents(...)` of tools.py writes files (`plt.savefig(path)`): it now runs on rank 0 only"
    assert not result.modules  # its own __main__ would run the edit without the launcher: MIG137


def test_ddp_says_why_the_module_is_not_edited(tmp_path: Path) -> None:
    result = converted(tmp_path, "ddp")
    [kept] = [f for f in result.findings if f.code == "MIG137"]
    assert "`tools.py` (imported here) was not converted with this script: its own `__main__` block (line 13) runs " \
           "`plot_latents`" in kept.message


def test_fsdp_keeps_the_call_on_every_rank_and_guards_the_write_in_the_module(tmp_path: Path) -> None:
    result = converted(tmp_path, "fsdp")
    assert '            plot_latents(model, loader, f"latents_{epoch}.png")\n' in result.new
    assert not [f for f in result.findings if f.code in ("MIG106", "MIG120")]
    [tools] = result.modules
    assert tools.path.endswith("tools.py")
    assert '    if os.environ.get("RANK", "0") == "0":\n        plt.savefig(path)\n' in tools.new
    assert tools.new.endswith('if __name__ == "__main__":\n    plot_latents(torch.load(sys.argv[1]), [], "latents.png")\n')
