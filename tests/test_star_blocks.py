"""FSDP's block search follows star imports, chained through packages (`from layers import *` in
the model's module, `from .functions import *` in layers/__init__.py, `from .blocks import Block`
there; w047's shape): the repeated block is found and sharded one by one, and MIG301 names no class
it could not find. Conversions only."""

from __future__ import annotations

from pathlib import Path

from migrate.api import migrate_source
from migrate.project_files import read_from_disk

BLOCKS = '''import torch.nn as nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + self.fc(x).relu()
'''

TRAIN = '''import torch
import torch.nn as nn
from layers import *


class Tower(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        if depth < 1:
            raise ValueError(depth)
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def main():
    model = Tower(8, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).pow(2).mean().backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_a_block_class_reached_through_chained_star_imports_is_sharded(tmp_path: Path) -> None:
    (tmp_path / "layers" / "functions").mkdir(parents=True)
    (tmp_path / "layers" / "__init__.py").write_text("from .functions import *\n")
    (tmp_path / "layers" / "functions" / "__init__.py").write_text("from .blocks import Block\n")
    (tmp_path / "layers" / "functions" / "blocks.py").write_text(BLOCKS)
    result = migrate_source(TRAIN, "fsdp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    [note] = [f.message for f in result.findings if f.code == "MIG301"]
    assert note.startswith("`model` is sharded per `Block` (the repeated blocks found)")
    assert "ValueError" not in note
