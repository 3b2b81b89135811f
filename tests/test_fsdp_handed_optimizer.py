"""An optimizer the training class of another module holds only as handed in
(`self.optimizer = kwargs["optimizer"]`, stepped through a GradScaler; w048's shape): its
`state_dict()` under FSDP is this rank's shards, so the save gathers it with
get_optimizer_state_dict on every rank, as for an optimizer built in place."""

from __future__ import annotations

from pathlib import Path

from migrate.api import migrate_source
from migrate.project_files import read_from_disk

LEARNER = '''import torch
import torch.nn as nn


def save_checkpoint(state, filename):
    torch.save(state, filename)


class Learner:
    def __init__(self, **kwargs):
        self.model = kwargs["model"]
        self.optimizer = kwargs["optimizer"]
        self.scaler = torch.amp.GradScaler("cuda", enabled=False)

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                self.optimizer.zero_grad()
                loss = nn.functional.mse_loss(self.model(x), y)
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
        save_checkpoint({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}, "last.pt")
'''

TRAIN = '''import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from learner import Learner


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 1)), batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    Learner(model=model, optimizer=optimizer).fit(loader, 2)


if __name__ == "__main__":
    main()
'''


def test_the_state_of_an_optimizer_handed_in_through_kwargs_is_gathered_for_the_save(tmp_path: Path) -> None:
    (tmp_path / "learner.py").write_text(LEARNER)
    result = migrate_source(TRAIN, "fsdp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    [learner] = result.modules
    assert ("        optimizer_state = get_optimizer_state_dict(self.model, self.optimizer, "
            "options=StateDictOptions(full_state_dict=True, cpu_offload=True))") in learner.new
    assert 'save_checkpoint({"model": model_state, "optimizer": optimizer_state}, "last.pt")' in learner.new


def test_horovod_synchronizes_a_handed_in_optimizer_before_the_scaler_steps_it(tmp_path: Path) -> None:
    """`scaler.step(self.optimizer)` checks for inf on the gradients: before they are averaged, a
    rank that finds one skips its step (and Horovod's synchronize in it) while the others wait."""
    (tmp_path / "learner.py").write_text(LEARNER)
    result = migrate_source(TRAIN, "horovod", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    [learner] = result.modules
    assert ("                self.scaler.scale(loss).backward()\n"
            "                with self.optimizer.skip_synchronize():\n"
            "                    self.optimizer.synchronize()  # average the gradients across ranks before they are read\n"
            "                    self.scaler.step(self.optimizer)\n") in learner.new
