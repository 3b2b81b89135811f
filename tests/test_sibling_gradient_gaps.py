"""DDP's unused parameters seen in a model class that a module of the script's folder defines
(`from nets import Net`): the same gap analysis as for a class of the script itself, read through
the reader the conversion is handed (migrate_paths reads the disk)."""

from __future__ import annotations

from pathlib import Path

from migrate import FileResult, migrate_paths, migrate_source

NETS = '''import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(6, 6)
        self.class_embedding = nn.Embedding(5, 6)

    def forward(self, x, label):
        out = self.trunk(x)
        if label is not None:
            out = out + self.class_embedding(label)
        return out
'''

TRAIN = '''import random

import torch
from torch.utils.data import DataLoader, TensorDataset

{imports}


def main():
    model = {build}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    samples = TensorDataset(torch.randn(40, 6), torch.randint(0, 5, (40,)))
    for epoch in range(2):
        for x, label in DataLoader(samples, batch_size=8, shuffle=True):
            if random.random() < 0.2:
                label = None  # unconditional steps now and then
            loss = model(x, label).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
'''


def _convert(folder: Path, imports: str = "from nets import Net", build: str = "Net()") -> FileResult:
    script = folder / "train.py"
    script.write_text(TRAIN.format(imports=imports, build=build))
    [result] = migrate_paths([str(script)], "ddp")
    assert isinstance(result, FileResult) and not result.error
    return result


def _gap_messages(result: FileResult) -> list[str]:
    return [f.message for f in result.findings if f.code == "MIG501"]


def test_a_parameter_the_sibling_forward_may_skip_makes_ddp_look_for_unused_ones(tmp_path: Path) -> None:
    (tmp_path / "nets.py").write_text(NETS)
    result = _convert(tmp_path)
    assert "find_unused_parameters=True" in result.new
    [message] = _gap_messages(result)
    # the part, the condition and where it is: in the module, not in the script
    assert "`model.class_embedding` runs only when `label is not None` is true" in message
    assert "(nets.py line 12)" in message
    assert "model.trunk" not in message


def test_a_class_reached_through_the_module_name_and_a_package_reexport(tmp_path: Path) -> None:
    package = tmp_path / "models"
    package.mkdir()
    (package / "__init__.py").write_text("from .conditional import Net\n")
    (package / "conditional.py").write_text(NETS)
    result = _convert(tmp_path, imports="import models", build="models.Net()")
    assert "find_unused_parameters=True" in result.new
    [message] = _gap_messages(result)
    assert "models/conditional.py line 12" in message.replace("\\", "/")


def test_without_the_module_file_nothing_is_found(tmp_path: Path) -> None:
    result = _convert(tmp_path)
    assert "find_unused_parameters" not in result.new and not _gap_messages(result)


def test_a_sibling_class_that_uses_every_part_gets_a_plain_wrap(tmp_path: Path) -> None:
    (tmp_path / "nets.py").write_text(NETS.replace("if label is not None:\n            ", ""))
    result = _convert(tmp_path)
    assert "find_unused_parameters" not in result.new and not _gap_messages(result)


def test_text_alone_reads_no_module(tmp_path: Path) -> None:
    """migrate_source without a reader sees the script alone, as before."""
    (tmp_path / "nets.py").write_text(NETS)
    result = migrate_source(TRAIN.format(imports="from nets import Net", build="Net()"), "ddp",
                            path=str(tmp_path / "train.py"))
    assert "find_unused_parameters" not in result.new
