"""migrate.param_count: the static count against torch's own `sum(p.numel() ...)`, for every sample
(its models built by running the sample in this process with `--epochs 0`, recording what its
optimizers hold) and for scripts written here that use each layer kind the count knows."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from migrate.records import InputError
from migrate.param_count import count_file, count_source

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted((ROOT / "samples").glob("*/train.py"))


def _held_by_optimizers(script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run the script here (`--epochs 0`: it builds its models and optimizers, trains nothing) and
    count the distinct parameters its optimizers were given."""
    held: dict[int, int] = {}
    original = torch.optim.Optimizer.__init__

    def recording(self, params, *args, **kwargs):  # type: ignore[no-untyped-def]
        params = list(params)
        for group in params:
            for p in (group["params"] if isinstance(group, dict) else [group]):
                held[id(p)] = p.numel()
        original(self, params, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Optimizer, "__init__", recording)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "--epochs", "0"])
    monkeypatch.syspath_prepend(str(script.parent))
    runpy.run_path(str(script), run_name="__main__")
    return sum(held.values())


@pytest.mark.parametrize("script", SAMPLES, ids=lambda p: p.parent.name)
def test_sample_counts_match_torch(script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = count_file(str(script))
    assert counted.unsized == ()
    assert counted.total == _held_by_optimizers(script, tmp_path, monkeypatch)


LAYERS = '''
import argparse
import string

import torch
import torch.nn as nn

VOCAB = len(string.ascii_letters + "0123")
WIDTH = 24


class Base(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.GroupNorm(4, channels)


class Mixer(Base):
    def __init__(self, channels, heads=4, bidirectional=True, extra=False):
        super().__init__(channels)
        self.conv = nn.Conv1d(channels, 2 * channels, 3, groups=2, bias=False)
        self.deconv = nn.ConvTranspose2d(channels, channels // 2, (3, 5))
        self.rnn = nn.LSTM(channels, channels // 2, num_layers=2, bidirectional=bidirectional)
        self.gru = nn.GRU(channels, 8, 1, False)
        self.attn = nn.MultiheadAttention(channels, heads, kdim=10, vdim=12, add_bias_kv=True)
        self.scale = nn.Parameter(torch.ones(channels, 3))
        hidden = channels * 3
        if extra:
            self.extra = nn.Linear(channels, hidden)
        else:
            self.bn = nn.BatchNorm1d(hidden)
        self.layers = nn.ModuleList()
        for _ in range(3):
            self.layers.append(nn.Linear(channels, channels))


class Net(nn.Module):
    def __init__(self, vocab, width, depth, dropout):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.blocks = nn.Sequential(*[Mixer(width) for _ in range(depth)], nn.ReLU(), nn.Dropout(dropout))
        self.encoder = nn.TransformerEncoderLayer(width, 4, dim_feedforward=40)
        self.decoder = nn.TransformerDecoderLayer(width, 2, 32, bias=False)
        self.prelu = nn.PReLU(width)
        self.ln = nn.LayerNorm([width], elementwise_affine=True, bias=False)
        self.head = nn.Bilinear(width, width, 3)

    def forward(self, x):
        return self.head(x, x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    model = Net(VOCAB, WIDTH, args.depth, dropout=args.dropout)
    optimizer = torch.optim.AdamW(model.parameters())
    for epoch in range(args.epochs):
        loss = model(torch.zeros(2, WIDTH)).sum()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_written_script_counts_every_layer_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text(LAYERS)
    counted = count_file(str(script))
    assert counted.unsized == ()
    assert counted.total == _held_by_optimizers(script, tmp_path, monkeypatch)


def test_largest_layer_is_deepspeeds(tmp_path: Path) -> None:
    """DeepSpeed's largest layer: the most parameters one module holds itself (recurse=False)."""
    script = tmp_path / "train.py"
    script.write_text(LAYERS)
    namespace = runpy.run_path(str(script), run_name="not_main")
    model = namespace["Net"](namespace["VOCAB"], namespace["WIDTH"], 2, 0.1)
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    assert count_file(str(script)).largest_layer == largest


MODELS_MODULE = '''
import torch.nn as nn

HIDDEN = 48


class Tower(nn.Module):
    def __init__(self, inputs, hidden=HIDDEN):
        super().__init__()
        self.stem = nn.Linear(inputs, hidden)
        self.body = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(2)])
        self.out = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.out(x)
'''

IMPORTING = '''
import torch
from nets import Tower

IN = 7


def train():
    model = Tower(IN).to("cpu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.zeros(1, 48)).sum()
    loss.backward()
    optimizer.step()


if __name__ == "__main__":
    train()
'''


def test_class_from_a_module_of_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nets.py").write_text(MODELS_MODULE)
    script = tmp_path / "train.py"
    script.write_text(IMPORTING)
    counted = count_file(str(script))
    assert counted.total == _held_by_optimizers(script, tmp_path, monkeypatch) == 7 * 48 + 48 + 2 * (48 * 48 + 48) + 48 * 2 + 2
    assert counted.unsized == ()


UNSIZABLE = '''
import torch
import torch.nn as nn
from timm import create_model


class Net(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.known = nn.Linear(4, 5)
        self.lazy = nn.LazyLinear(3)
        self.wide = nn.Linear(features.shape[1], 10)
        self.backbone = Backbone()


def main(data):
    model = Net(data)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(data).sum().backward()
    optimizer.step()
'''


def test_layers_it_cannot_size_are_named_with_their_line() -> None:
    counted = count_source(UNSIZABLE, "user/train.py")
    assert counted.total == 4 * 5 + 5
    found = {(u.name, u.line) for u in counted.unsized}
    assert found == {("Net.lazy", 11), ("Net.wide", 12), ("Net.backbone", 13)}
    wide = next(u for u in counted.unsized if u.name == "Net.wide")
    assert str(wide).startswith("user/train.py:12:") and "features.shape[1]" in wide.why


def test_syntax_error_names_the_users_path() -> None:
    with pytest.raises(InputError) as caught:
        count_source("def f(:\n", "mine/train.py")
    assert str(caught.value).startswith("mine/train.py:1:")


def test_no_model_says_so() -> None:
    with pytest.raises(InputError, match="give --params") as caught:
        count_source("x = 1\nprint(x)\n", "mine/train.py")
    assert str(caught.value).startswith("mine/train.py: cannot count its parameters")


SHAPES = '''
import torch
import torch.nn as nn

SETTINGS = {"vocab": 40, "width": 16, "layers": 2, "kind": "gru", "tied": False}
LETTERS = [c for c in "PSEabcdefg"]
INDEX = {c: i for i, c in enumerate(LETTERS)}


class Model(nn.Module):
    def __init__(self, cfg, wide=True):
        super().__init__()
        self.emb = nn.Embedding(cfg["vocab"] + len(INDEX), cfg["width"])
        if wide:
            self.wide = nn.Linear(cfg["width"], 2 * cfg["width"])
        if not wide: self.narrow = nn.Linear(cfg["width"], 3)
        if cfg["kind"] == "lstm":
            self.rnn = nn.LSTM(cfg["width"], cfg["width"])
        elif cfg["kind"] in ("gru", "rnn") and cfg["layers"] > 1:
            self.rnn = nn.GRU(cfg["width"], cfg["width"], num_layers=cfg["layers"])
        else:
            self.rnn = nn.RNN(cfg["width"], cfg["width"])
        layer = nn.TransformerEncoderLayer(cfg["width"], 2, dim_feedforward=24, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=3, norm=nn.LayerNorm(cfg["width"]))
        blocks = []
        for _ in range(cfg["layers"]):
            block = nn.Linear(cfg["width"], cfg["width"])
            blocks.append(block)
        self.blocks = nn.ModuleList(blocks)
        head = nn.Linear(cfg["width"], len(LETTERS), bias=cfg["tied"] is not True)
        self.add_module("head", head)

    def forward(self, x):
        return self.head(x)


def main():
    model = Model(SETTINGS)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.zeros(1, 16)).sum().backward()
    optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_real_shapes_dicts_branches_local_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes of corpus models (benchmarks/param_count_corpus.py): a configuration dict read by key, a
    vocabulary built by comprehensions, an `if` taken (it crashed the count) and one on one line,
    comparisons, a local layer repeated by nn.TransformerEncoder, local layers appended to a list."""
    script = tmp_path / "train.py"
    script.write_text(SHAPES)
    monkeypatch.setattr(sys, "argv", [str(script)])
    counted = count_file(str(script))
    assert counted.unsized == ()
    assert counted.total == _held_by_optimizers(script, tmp_path, monkeypatch)


CALLED_ELSEWHERE = '''
import torch.nn as nn


class Loss(nn.Module):
    def __init__(self, hidden, splits):
        super().__init__()
        self.cuts = [0] + splits + [10 ** 6]
        if len(self.cuts) > 2:
            self.tail = nn.Parameter(torch.zeros(len(self.cuts) - 2, hidden))


if __name__ == "__main__":
    Loss(8, splits=[4])
'''

CALLER = '''
import torch
from loss import Loss


def train(data):
    splits = data.splits
    criterion = Loss(16, splits=splits)
    optimizer = torch.optim.SGD(criterion.parameters(), lr=0.1)
    criterion(data).backward()
    optimizer.step()
'''


def test_an_unknown_argument_is_not_read_from_another_caller(tmp_path: Path) -> None:
    """`splits` is unknown where the script builds the class: the self-test at the bottom of the
    class's module (`splits=[4]`) must not lend it a value (it counted 16 parameters that are not there)."""
    (tmp_path / "loss.py").write_text(CALLED_ELSEWHERE)
    (tmp_path / "train.py").write_text(CALLER)
    counted = count_file(str(tmp_path / "train.py"))
    assert counted.total == 0
    assert [u.name for u in counted.unsized] == ["Loss: the `if len(self.cuts) > 2:`"]
    assert counted.unsized[0].why.startswith("`self.cuts`: `splits`")


BRANCHES = '''
import torch
import torch.nn as nn

NAME = "big"


class Big(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(100, 100)


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 10)


if NAME == "big":
    net = Big()
elif NAME == "small":
    net = Small()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
net(torch.zeros(1, 100)).sum().backward()
optimizer.step()
'''


def test_the_construction_in_the_branch_taken() -> None:
    """`if NAME == "big": net = Big() elif ...: net = Small()`: Big is built (it counted Small)."""
    assert count_source(BRANCHES, "user/train.py").total == 100 * 100 + 100
    other = count_source(BRANCHES.replace('NAME = "big"', 'NAME = "small"'), "user/train.py")
    assert other.total == 10 * 10 + 10


def test_a_choice_it_cannot_make_is_named() -> None:
    unknown = BRANCHES.replace('NAME = "big"', "import os\nNAME = os.environ['NET']")
    counted = count_source(unknown, "user/train.py")
    assert [u.why for u in counted.unsized] == [
        "built by one of several calls (lines 22, 24) under `if`s this count cannot decide; counted this one"]
