"""Files without a backward pass: left unchanged with MIG002, which names the script's own modules
where the training loop may live; a file that does not parse is still bad input."""

from __future__ import annotations

import pytest

from migrate import InputError, migrate_source

LAUNCHER = '''import argparse

import torch

from simclr import SimCLR
from models.resnet import ResNetSimCLR


def main():
    args = argparse.ArgumentParser().parse_args()
    SimCLR(model=ResNetSimCLR(), args=args).train()
'''


def test_mig002_names_the_modules_that_may_hold_the_training_loop() -> None:
    result = migrate_source(LAUNCHER, "ddp")
    assert result.new == LAUNCHER
    [note] = result.findings
    assert note.code == "MIG002" and (note.line, note.col) == (1, 1)
    assert "such as `models`, `simclr`, convert that file" in note.message
    assert "torch" not in note.message.replace("left unchanged", "")


def test_a_plain_module_gets_the_plain_note() -> None:
    [note] = migrate_source("import torch\nx = torch.zeros(2)\n", "ddp").findings
    assert note.message == "not a training script (no backward pass); left unchanged"


def test_a_syntax_error_is_bad_input_even_without_backward() -> None:
    with pytest.raises(InputError) as error:
        migrate_source("def broken(:\n    pass\n", "ddp", path="broken.py")
    assert (error.value.line, error.value.message.startswith("syntax error")) == (1, True)
