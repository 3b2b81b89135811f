"""A SummaryWriter made by a helper that returns it (`self.writer = self.summary.create_summary()`,
the helper in another module of the project) is a writer like one made in place: made on rank 0
only, every use guarded, also where the script reads it through the instance
(`trainer.writer.close()`); the helper's own `SummaryWriter(...)` is left as it is (it runs where
it is called). Conversions only."""

from __future__ import annotations

from pathlib import Path

from migrate.api import migrate_source
from migrate.project_files import read_from_disk

SUMMARIES = '''from torch.utils.tensorboard import SummaryWriter


class Summaries:
    def __init__(self, folder):
        self.folder = folder

    def create_summary(self):
        writer = SummaryWriter(log_dir=self.folder)
        return writer

    def show_batch(self, writer, images, step):
        writer.add_images("batch", images, step)
'''

TRAIN = '''import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from summaries import Summaries


class Trainer:
    def __init__(self, folder):
        self.model = nn.Linear(8, 2)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8, shuffle=True)
        self.summary = Summaries(folder)
        self.writer = self.summary.create_summary()

    def epoch(self, number):
        for step, (x, y) in enumerate(self.loader):
            self.optimizer.zero_grad()
            loss = nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.writer.add_scalar("loss", loss.item(), number * len(self.loader) + step)
            if step == 0:
                self.summary.show_batch(self.writer, x.view(-1, 1, 2, 4), number)


def main():
    trainer = Trainer("runs/demo")
    for number in range(2):
        trainer.epoch(number)
    trainer.writer.close()


if __name__ == "__main__":
    main()
'''


def test_a_writer_returned_by_a_helper_is_made_and_used_on_rank_zero_only(tmp_path: Path) -> None:
    (tmp_path / "summaries.py").write_text(SUMMARIES)
    result = migrate_source(TRAIN, "ddp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    assert "        self.writer = self.summary.create_summary() if dist.get_rank() == 0 else None\n" in result.new
    assert ("            if dist.get_rank() == 0:\n"
            "                self.writer.add_scalar(\"loss\", loss.item(), number * len(self.loader) + step)\n") in result.new
    assert ("            if step == 0 and dist.get_rank() == 0:\n"
            "                self.summary.show_batch(self.writer, x.view(-1, 1, 2, 4), number)\n") in result.new
    assert "    if dist.get_rank() == 0:\n        trainer.writer.close()\n" in result.new
    assert not [f for f in result.findings if f.code == "MIG120"]
    [summaries] = result.modules  # its SummaryWriter runs where it is called, on rank 0: left as written
    assert "        writer = SummaryWriter(log_dir=self.folder)\n        return writer\n" in summaries.new


OPTIONAL_WRITER = '''import argparse

import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tb", action="store_true")
    args = parser.parse_args()
    writer = SummaryWriter("runs") if args.tb else None
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        optimizer.zero_grad()
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        optimizer.step()
        if writer is not None:
            writer.add_scalar("loss", loss.item(), step)


if __name__ == "__main__":
    main()
'''


def test_a_writer_made_only_when_asked_keeps_that_condition_on_rank_zero() -> None:
    """`SummaryWriter() if args.tb else None`: rank 0's test goes in parentheses around the writer,
    or Python would read `... else (None if args.tb else None)` and make a writer without --tb."""
    new = migrate_source(OPTIONAL_WRITER, "ddp").new
    assert '    writer = (SummaryWriter("runs") if dist.get_rank() == 0 else None) if args.tb else None\n' in new
    compile(new, "train.py", "exec")


VISUALIZER = '''from visdom import Visdom


class Visualizer:
    def __init__(self, port=8097, env="main"):
        self.vis = Visdom(port=port, env=env)

    def scalar(self, name, x, y):
        self.vis.line(X=[x], Y=[y], win=name, update="append")


if __name__ == "__main__":
    Visualizer().scalar("demo", 0, 1)
'''

USES_VISUALIZER = '''import argparse

import torch
import torch.nn as nn
from visualizer import Visualizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vis", action="store_true")
    args = parser.parse_args()
    vis = Visualizer(env="demo") if args.vis else None
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        optimizer.zero_grad()
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        optimizer.step()
        if vis is not None:
            vis.scalar("loss", step, loss.item())


if __name__ == "__main__":
    main()
'''


def test_a_class_of_another_module_that_opens_a_visdom_window_is_made_on_rank_zero_only(tmp_path: Path) -> None:
    """visualizer.py's class opens a Visdom connection in `__init__`: every rank would plot each
    point, so it is made on rank 0; its methods, which only that one instance runs, are left as
    written (visualizer.py is read with the script, its own `__main__` block aside, and not edited)."""
    (tmp_path / "visualizer.py").write_text(VISUALIZER)
    result = migrate_source(USES_VISUALIZER, "ddp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    assert '    vis = (Visualizer(env="demo") if dist.get_rank() == 0 else None) if args.vis else None\n' in result.new
    assert '        if vis is not None:\n            vis.scalar("loss", step, loss.item())\n' in result.new
    assert not result.modules
    assert not [f for f in result.findings if f.code == "MIG137"]
