"""Reviewed defects of output-once and shared files, each on a small one-file script converted in
memory (no process launched): a save helper method of the class that trains, a file opened for
writing by a compressing opener, a writer made on rank 0 only whose attributes other lines read,
and a dataset download chosen from a table of lambdas."""

from __future__ import annotations

import pytest

from migrate import migrate_source

RANK_ZERO = {"ddp": "dist.get_rank() == 0", "fsdp": "dist.get_rank() == 0", "deepspeed": "dist.get_rank() == 0",
             "horovod": "hvd.rank() == 0"}
BARRIER = {"ddp": "dist.barrier()", "fsdp": "dist.barrier()", "deepspeed": "dist.barrier()", "horovod": "hvd.barrier()"}

# -- 1. a save helper method: `agent.save(path)` from the training loop ---------------------------

AGENT = '''
import torch
import torch.nn as nn


class Agent:
    def __init__(self):
        self.policy = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=1e-3)

    def learn(self, obs):
        loss = self.policy(obs).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

    def save(self, path):
        torch.save(self.policy.state_dict(), path)

    def restore(self, path):
        self.policy.load_state_dict(torch.load(path))


def main():
    agent = Agent()
    for episode in range(50):
        agent.learn(torch.randn(12, 6))
        if episode % 10 == 9:
            agent.save("policy.pt")
    agent.restore("policy.pt")


if __name__ == "__main__":
    main()
'''


def _block_after(new: str, line: str) -> str:
    """The text from the line holding `line` to the end of its method."""
    start = new.index(line)
    end = new.find("\n    def ", start)
    return new[start:end if end != -1 else len(new)]


@pytest.mark.parametrize("target", ["ddp", "fsdp", "deepspeed", "horovod"])
def test_a_save_method_of_the_trained_class_writes_on_rank_zero_only(target: str) -> None:
    new = migrate_source(AGENT, target, path="agent.py").new
    save = _block_after(new, "    def save(self, path):")
    saving = [line.strip() for line in save.splitlines() if "torch.save(" in line]
    assert len(saving) == 1, save
    lines = save.splitlines()
    at = next(i for i, line in enumerate(lines) if "torch.save(" in line)
    guard = next(line for line in reversed(lines[:at]) if line.strip().startswith("if "))
    assert guard.strip() == f"if {RANK_ZERO[target]}:", save
    assert len(guard) - len(guard.lstrip()) < len(lines[at]) - len(lines[at].lstrip())
    # the file rank 0 wrote is read back on every rank: they wait for it first, as for any such write
    restore = _block_after(new, "    def restore(self, path):")
    assert restore.index(BARRIER[target]) < restore.index("torch.load(")


def test_the_save_method_of_ddp_still_saves_the_inner_module() -> None:
    new = migrate_source(AGENT, "ddp", path="agent.py").new
    assert f"        if {RANK_ZERO['ddp']}:\n            torch.save(self.policy.module.state_dict(), path)" in new


# -- 2. a compressing opener in write mode -------------------------------------------------------

OPENERS = '''
import bz2
import gzip
import lzma
import pickle

import torch
import torch.nn as nn


def dump_replay(replay, path):
    with bz2.open(path, "wb") as out:
        pickle.dump(replay, out)


def dump_log(lines, path):
    with gzip.open(path, mode="wt") as out:
        out.write("\\n".join(lines))


def dump_raw(blob, path):
    with lzma.open(path, "w") as out:
        out.write(blob)


def read_replay(path):
    with bz2.open(path, "rb") as src:
        return pickle.load(src)


def main():
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    replay = []
    for step in range(20):
        loss = model(torch.randn(4, 3)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        replay.append(loss.item())
    dump_replay(replay, "replay.bz2")
    dump_log([str(x) for x in replay], "log.gz")
    dump_raw(bytes(4), "raw.xz")
    print(len(read_replay("replay.bz2")))


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize("target", ["ddp", "horovod"])
def test_a_file_opened_for_writing_by_a_compressing_opener_is_opened_on_rank_zero_only(target: str) -> None:
    new = migrate_source(OPENERS, target, path="train.py").new
    test = RANK_ZERO[target]
    # the whole `with` on rank 0: every other rank opening it for writing would truncate the file
    assert f'    if {test}:\n        with bz2.open(path, "wb") as out:\n            pickle.dump(replay, out)\n' in new
    assert f'    if {test}:\n        with gzip.open(path, mode="wt") as out:\n' in new
    assert f'    if {test}:\n        with lzma.open(path, "w") as out:\n' in new
    # reading stays on every rank
    assert '    with bz2.open(path, "rb") as src:\n        return pickle.load(src)\n' in new


HANDLE = '''
import gzip

import torch
import torch.nn as nn


def main():
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    out = gzip.open("losses.txt.gz", "wt")
    for step in range(20):
        loss = model(torch.randn(4, 3)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out.write(f"{loss.item()}\\n")
    out.close()


if __name__ == "__main__":
    main()
'''


def test_a_compressed_handle_opened_for_writing_is_opened_written_and_closed_on_rank_zero() -> None:
    new = migrate_source(HANDLE, "ddp", path="train.py").new
    assert '    if dist.get_rank() == 0:\n        out = gzip.open("losses.txt.gz", "wt")\n' in new
    assert '        if dist.get_rank() == 0:\n            out.write(f"{loss.item()}\\n")\n' in new
    assert "    if dist.get_rank() == 0:\n        out.close()\n" in new


# -- 3. a writer made on rank 0 only, whose attributes other lines read --------------------------

TRAINER = '''
import logging
import os

import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter


def write_settings(folder, settings):
    with open(os.path.join(folder, "settings.txt"), "w") as f:
        f.write(str(settings))


class Trainer:
    def __init__(self, model, optimizer, scheduler):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.writer = SummaryWriter()
        logging.basicConfig(filename=os.path.join(self.writer.log_dir, "training.log"), level=logging.INFO)

    def fit(self, steps):
        write_settings(self.writer.log_dir, {"steps": steps})
        weights = os.path.join(self.writer.log_dir, "weights.pt")
        for step in range(steps):
            loss = self.model(torch.randn(8, 4)).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            self.writer.add_scalar("loss", loss.item(), step)
            self.writer.add_scalar("lr", self.scheduler.get_last_lr()[0], step)
        torch.save(self.model.state_dict(), weights)


def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    Trainer(model, optimizer, scheduler).fit(100)


if __name__ == "__main__":
    main()
'''


def _guarded(new: str, line: str, test: str) -> bool:
    """Whether the line holding `line` sits in the body of an `if <test>:` (directly or deeper)."""
    lines = new.splitlines()
    at = next(i for i, text in enumerate(lines) if line in text)
    indent = len(lines[at]) - len(lines[at].lstrip())
    for text in reversed(lines[:at]):
        stripped, depth = text.strip(), len(text) - len(text.lstrip())
        if stripped and depth < indent:
            if stripped.startswith("if ") and test in stripped:
                return True
            if stripped.startswith(("def ", "class ")):
                return False
            indent = depth
    return False


@pytest.mark.parametrize("target", ["ddp", "fsdp", "horovod"])
def test_every_line_that_reads_a_rank_zero_writer_runs_on_rank_zero(target: str) -> None:
    result = migrate_source(TRAINER, target, path="train.py")
    new, test = result.new, RANK_ZERO[target]
    assert f"self.writer = SummaryWriter() if {test} else None" in new
    for read in ('logging.basicConfig(filename=os.path.join(self.writer.log_dir, "training.log")',
                 "write_settings(self.writer.log_dir,",
                 'weights = os.path.join(self.writer.log_dir, "weights.pt")',
                 'self.writer.add_scalar("loss", loss.item(), step)',
                 'self.writer.add_scalar("lr", self.scheduler.get_last_lr()[0], step)'):
        assert _guarded(new, read, test), (read, new)
    # `weights` is bound from the writer on rank 0 only: the save that reads it runs there too
    assert _guarded(new, "torch.save(", test), new
    assert not [f for f in result.findings if f.code == "MIG120"], result.findings


EVALUATED = '''
import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter


def evaluate(model):
    with torch.no_grad():
        return model(torch.randn(8, 4)).pow(2).mean().item()


def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = SummaryWriter()
    for step in range(100):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        writer.add_scalar("val", evaluate(model), step)


if __name__ == "__main__":
    main()
'''


def test_a_writer_call_whose_value_runs_the_model_computes_it_on_every_rank_and_writes_on_rank_zero() -> None:
    new = migrate_source(EVALUATED, "ddp", path="train.py").new
    assert ("        message = evaluate(model)  # computed on every rank: it may run the model\n"
            "        if dist.get_rank() == 0:\n"
            '            writer.add_scalar("val", message, step)\n') in new


RETURNED = '''
import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter


def train():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = SummaryWriter()
    run_dir = writer.log_dir
    for step in range(100):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        writer.add_scalar("loss", loss.item(), step)
    return run_dir


if __name__ == "__main__":
    print(train())
'''


def test_a_writer_read_where_rank_zero_alone_cannot_go_keeps_the_writer_on_every_rank_and_says_so() -> None:
    result = migrate_source(RETURNED, "ddp", path="train.py")
    assert "    writer = SummaryWriter()\n" in result.new  # made on every rank: `return run_dir` needs it there
    assert _guarded(result.new, 'writer.add_scalar("loss", loss.item(), step)', "dist.get_rank() == 0")
    found = [f for f in result.findings if f.code == "MIG120"]
    assert len(found) == 1, result.findings
    message = found[0].message
    assert "`return run_dir`" in message and "`writer.log_dir`" in message and "it returns" in message
    assert "left on every rank" in message and "already moved" not in message
    assert found[0].line == 18


# -- 4. a dataset download chosen from a table of lambdas ------------------------------------------

CHOSEN = '''
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class UnknownDataset(Exception):
    pass


def pick_dataset(root, name):
    choices = {
        "mnist": lambda: datasets.MNIST(root, train=True, transform=transforms.ToTensor(), download=True),
        "fashion": lambda: datasets.FashionMNIST(root, train=True, transform=transforms.ToTensor(), download=True),
    }
    try:
        make = choices[name]
    except KeyError:
        raise UnknownDataset(name)
    else:
        return make()


def main():
    data = pick_dataset("data", "mnist")
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize("target", ["ddp", "fsdp", "horovod", "deepspeed"])
def test_only_the_dataset_chosen_from_a_table_of_lambdas_downloads_once_per_node(target: str) -> None:
    new = migrate_source(CHOSEN, target, path="train.py").new
    local = "HOROVOD_LOCAL_RANK" if target == "horovod" else "LOCAL_RANK"
    block = (f'        if int(os.environ.get("{local}", "0")) == 0:  # one download per node, of the dataset chosen '
             "here; the other ranks wait\n"
             "            make()\n"
             f"        {BARRIER[target]}\n"
             "        return make()\n")
    assert block in new, new
    # neither dataset is built anywhere else: the one not chosen is never downloaded
    assert new.count("datasets.MNIST(") == 1 and new.count("datasets.FashionMNIST(") == 1


HANDED_ON = '''
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def dataset_makers(root):
    makers = {
        "mnist": lambda: datasets.MNIST(root, train=True, transform=transforms.ToTensor(), download=True),
        "fashion": lambda: datasets.FashionMNIST(root, train=True, transform=transforms.ToTensor(), download=True),
    }
    return makers


def main():
    data = dataset_makers("data")["mnist"]()
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_a_table_of_download_lambdas_handed_on_is_left_alone_with_a_finding() -> None:
    result = migrate_source(HANDED_ON, "ddp", path="train.py")
    assert "download=True)" not in result.new.split("makers = {")[0]  # nothing downloaded ahead of the table
    assert "LOCAL_RANK\", \"0\")) == 0" not in result.new
    found = [f for f in result.findings if f.code == "MIG120"]
    assert [f.line for f in found] == [10, 11], result.findings
    assert all("stands in a lambda" in f.message and "`return makers` hands `makers` on" in f.message for f in found)


ONE_LINE = '''
import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter


def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = SummaryWriter()
    for step in range(100):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0: writer.add_scalar("loss", loss.item(), step)


if __name__ == "__main__":
    main()
'''


def test_a_writer_call_in_a_one_line_body_runs_on_rank_zero() -> None:
    new = migrate_source(ONE_LINE, "ddp", path="train.py").new
    assert "writer = SummaryWriter() if dist.get_rank() == 0 else None" in new
    assert _guarded(new, 'writer.add_scalar("loss", loss.item(), step)', "dist.get_rank() == 0"), new


BAR_WRITE = '''import torch
from tqdm import tqdm


def main():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    pbar = tqdm(total=10)
    for step in range(10):
        loss = model(torch.randn(4, 2)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        pbar.update(1)
        if step % 5 == 0:
            pbar.write(f"step {step} loss {loss.item():.3f}")
    with tqdm(range(3)) as bar:
        for item in bar:
            bar.write(str(item))


if __name__ == "__main__":
    main()
'''


def test_a_progress_bar_s_write_prints_on_rank_0_only() -> None:
    # tqdm(disable=...) silences the bar, not `pbar.write`, a class method that prints anyway
    new = migrate_source(BAR_WRITE, "ddp").new
    assert 'if step % 5 == 0 and dist.get_rank() == 0:\n            pbar.write(f"step {step} loss {loss.item():.3f}")' in new
    assert "            if dist.get_rank() == 0:\n                bar.write(str(item))" in new


PLOT_WRITE = '''import plotly
import torch


def main():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(10):
        loss = model(torch.randn(4, 2)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    plotly.offline.plot({"data": [{"y": losses}]}, filename="loss.html", auto_open=False)


if __name__ == "__main__":
    main()
'''


def test_a_plotly_page_is_written_by_rank_0_only() -> None:
    new = migrate_source(PLOT_WRITE, "ddp").new
    assert ('    if dist.get_rank() == 0:\n        plotly.offline.plot({"data": [{"y": losses}]}, filename="loss.html", '
            'auto_open=False)') in new
