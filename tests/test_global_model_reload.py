"""A script that pickles its model with others (`torch.save([model, criterion, optimizer], f)`) and
reloads it through a function that declares `global model` (the shape of an LSTM language-model
trainer: `model_save(fn)` on a new best score, `model_load(fn)` to resume and again before the
test run).

- The pickled list holds `model.module`, never the wrapper: a single process could not unpickle
  DDP without a process group, and the checkpoint's format would change.
- A reload that runs after the wrap binds `model` to the loaded, unwrapped model: the converted
  code's `model.module` reads would fail on it. DDP, FSDP and DeepSpeed leave the file unchanged
  with MIG104 at that binding. A reload called only before the wrap (a resume) converts.
"""

from __future__ import annotations

import pytest

from migrate import migrate_source

HEAD = """\
import sys

import torch
import torch.nn as nn


def model_save(fn):
    with open(fn, "wb") as f:
        torch.save([model, criterion, optimizer], f)


def model_load(fn):
    global model, criterion, optimizer
    with open(fn, "rb") as f:
        model, criterion, optimizer = torch.load(f)


model = nn.Linear(4, 2)
criterion = nn.MSELoss()
"""

TRAIN = """\
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 2)), batch_size=8)
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    model_save("best.pt")
"""

RELOADED_AFTER = HEAD + TRAIN + """
model_load("best.pt")
print(model(torch.randn(1, 4)))
"""

RESUMED_BEFORE = HEAD + """\
if len(sys.argv) > 1:
    model_load(sys.argv[1])
""" + TRAIN


@pytest.mark.parametrize("target", ["ddp", "fsdp", "deepspeed"])
def test_a_reload_after_the_wrap_is_refused_at_the_global_binding(target: str) -> None:
    result = migrate_source(RELOADED_AFTER, target, path="lm.py")
    assert result.new == RELOADED_AFTER
    refusals = [f for f in result.findings if f.code == "MIG104"]
    assert len(refusals) == 1, [f.message for f in result.findings]
    assert (refusals[0].line, refusals[0].col) == (15, 9)  # `model, criterion, optimizer = torch.load(f)`
    assert refusals[0].message.startswith("`model_load()` declares `global model` and binds it again "
                                          "(`model, criterion, optimizer = torch.load(f)`)")
    assert "after line 18" in refusals[0].message  # `model = nn.Linear(4, 2)`, the wrap goes right after it


def test_a_reload_only_before_the_wrap_converts_and_the_pickled_list_holds_the_module() -> None:
    result = migrate_source(RESUMED_BEFORE, "ddp", path="lm.py")
    assert not [f for f in result.findings if f.code == "MIG104"], [f.message for f in result.findings]
    lines = [line.strip() for line in result.new.splitlines()]
    assert "torch.save([model.module, criterion, optimizer], f)" in lines
    assert lines.index("model_load(sys.argv[1])") < lines.index("model = DDP(model)")
