"""Weights read through a lambda (`weights = lambda: model.state_dict()`) gather at each call under
FSDP, on every rank (DeepSpeed refuses them); a model that is a container (`model[0]`) is indexed
through `.module` after a DDP or DeepSpeed wrap, and left as it is where the wrapper keeps the class."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.api import migrate_source
from migrate import DeepSpeedOptions
from migrate.records import FileResult
from tests import progress

CASES = Path(__file__).parent / "cases"

HEAD = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

LOOP = """\
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
"""

TAIL = """

if __name__ == "__main__":
    main()
"""


def script(before_loop: str, after_epoch: str = "", after_loop: str = "") -> str:
    return HEAD + before_loop + LOOP + after_epoch + after_loop + TAIL


def codes(result: FileResult) -> list[str]:
    return [finding.code for finding in result.findings]


SAVED_EACH_EPOCH = script("    weights = lambda: model.state_dict()\n",
                          '        torch.save(weights(), f"w{epoch}.pt")\n')


def test_fsdp_lambda_gathers_at_each_call_on_every_rank() -> None:
    new = migrate_source(SAVED_EACH_EPOCH, "fsdp").new
    assert "weights = lambda: get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))" in new
    assert "weights = lambda: model_state" not in new  # no snapshot taken once before training
    call = new.index("        weights_state = weights()  # every rank gathers")
    guard = new.index("        if dist.get_rank() == 0:\n            torch.save(weights_state, ")
    assert call < guard


def test_fsdp_lambda_call_assigned_alone_stays() -> None:
    new = migrate_source(script("    snapshot = lambda: model.state_dict()\n", after_loop="    best = snapshot()\n"
                                '    torch.save(best, "best.pt")\n'), "fsdp").new
    assert "    best = snapshot()\n" in new
    assert "snapshot_state" not in new


def test_fsdp_lambda_call_in_open_file_gathers_above_the_with() -> None:
    new = migrate_source(script("    weights = lambda: model.state_dict()\n",
                                after_loop='    with open("w.pt", "wb") as f:\n        torch.save(weights(), f)\n'), "fsdp").new
    assert "    weights_state = weights()  # every rank gathers" in new
    assert new.index("weights_state = weights()") < new.index('with open("w.pt", "wb") as f:')
    assert "torch.save(weights_state, f)" in new


@pytest.mark.parametrize("use", ["    hooks = [weights]\n", "    weights = lambda: {}\n"])
def test_fsdp_lambda_handed_on_or_rebound_is_refused(use: str) -> None:
    code = script("    weights = lambda: model.state_dict()\n" + use, '        torch.save(weights(), f"w{epoch}.pt")\n')
    result = migrate_source(code, "fsdp")
    assert "MIG303" in codes(result)
    assert result.new == code
    message = next(f.message for f in result.findings if f.code == "MIG303")
    assert "`weights = lambda: model.state_dict()` (line 11)" in message


def test_fsdp_unbound_lambda_is_refused() -> None:
    code = script("    save_state = print\n",
                  after_loop='    save_state(lambda: model.state_dict())\n')
    result = migrate_source(code, "fsdp")
    assert "MIG303" in codes(result) and result.new == code
    assert "not bound to a name" in next(f.message for f in result.findings if f.code == "MIG303")


def test_fsdp_function_gathers_inside_at_each_call() -> None:
    code = script("    def weights():\n        return model.state_dict()\n\n", '        torch.save(weights(), f"w{epoch}.pt")\n')
    new = migrate_source(code, "fsdp").new
    body = new[new.index("    def weights():"):new.index("    for epoch in range(2):")]
    assert "model_state = get_model_state_dict(model" in body and "return model_state" in body


@pytest.mark.parametrize("zero", [2, 3])
def test_deepspeed_lambda_called_after_the_engine_is_refused(zero: int) -> None:
    result = migrate_source(SAVED_EACH_EPOCH, "deepspeed", DeepSpeedOptions(zero=zero))
    assert result.new == SAVED_EACH_EPOCH
    message = next(f.message for f in result.findings if f.code == "MIG127")
    assert "`weights = lambda: model.state_dict()` (line 11)" in message and "the file is left unchanged" in message


def test_deepspeed_lambda_called_before_training_is_refused_too() -> None:
    """The engine goes above the first statement that is no use of the model it sees, so the save
    through the lambda runs on the engine (keys `module.x`) and would have to gather there."""
    code = script("    weights = lambda: model.state_dict()\n    torch.save(weights(), \"init.pt\")\n")
    result = migrate_source(code, "deepspeed", DeepSpeedOptions(zero=3))
    assert "MIG127" in codes(result) and result.new == code


INDEXED = script("", '        print(model[-1].weight.sum().item())\n', "    first = model[0]\n    for layer in model[1:]:\n"
                 "        print(layer)\n")


@pytest.mark.parametrize("target", ["ddp", "deepspeed"])
def test_indexing_goes_through_module_after_the_wrap(target: str) -> None:
    new = migrate_source(INDEXED, target).new
    assert "model.module[-1].weight.sum()" in new
    assert "    first = model.module[0]\n" in new
    assert "    for layer in model.module[1:]:\n" in new
    assert "model.module.module" not in new


@pytest.mark.parametrize("target", ["fsdp", "horovod"])
def test_indexing_stays_where_the_wrapper_keeps_the_class(target: str) -> None:
    new = migrate_source(INDEXED, target).new
    assert "    first = model[0]\n" in new and ".module[" not in new


def test_indexing_before_the_wrap_stays() -> None:
    """A freeze before training: the wrap goes after it, so the module is still indexed directly."""
    code = HEAD.replace("    optimizer =", "    model[0].requires_grad_(False)\n    optimizer =") + LOOP + TAIL
    new = migrate_source(code, "ddp").new
    assert new.index("    model[0].requires_grad_(False)\n") < new.index("    model = DDP(model")


@pytest.mark.slow
@pytest.mark.full
def test_fsdp_lambda_saves_each_epochs_weights_on_two_ranks(tmp_path: Path) -> None:
    """The golden case's converted script under torchrun with 2 ranks: each epoch's file holds that
    epoch's weights (not those before training), with the original keys, and the last one equals
    the final save."""
    torch = pytest.importorskip("torch")
    shutil.copy(CASES / "state_dict_lambda" / "fsdp.py", tmp_path / "train.py")
    torchrun = Path(sys.executable).parent / "torchrun"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = progress.run_ranks([str(torchrun), "--standalone", "--nproc_per_node=2", "train.py"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    epochs = [torch.load(tmp_path / f"classifier_epoch{n}.pt") for n in range(3)]
    final = torch.load(tmp_path / "classifier_final.pt")
    assert set(final) == {"hidden.weight", "hidden.bias", "out.weight", "out.bias"}
    assert all(set(e) == set(final) for e in epochs)
    assert not torch.equal(epochs[0]["out.weight"], epochs[2]["out.weight"])
    assert all(torch.equal(epochs[2][key], final[key]) for key in final)
