"""local_rank_argument (DeepSpeed): the deepspeed launcher appends `--local_rank=N`; the
script's argparse parser learns the option right before it parses sys.argv."""

from __future__ import annotations

from migrate.steps.local_rank_argument import local_rank_argument
from tests.steps.helpers import run_step

SCRIPT = """\
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

ARGUMENT = '    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")'


def test_the_parser_learns_local_rank_right_before_it_parses() -> None:
    result = run_step(local_rank_argument, SCRIPT, target="deepspeed")
    assert result.removed == []
    assert result.added == [ARGUMENT]
    assert f'default=0.1)\n{ARGUMENT}\n    args = parser.parse_args()\n' in result.text
    assert result.findings == ()


def test_parse_known_args_gets_it_too() -> None:
    result = run_step(local_rank_argument, SCRIPT.replace("args = parser.parse_args()", "args, _ = parser.parse_known_args()"),
                      target="deepspeed")
    assert result.added == [ARGUMENT]


def test_a_parser_that_declares_local_rank_is_left_as_it_is() -> None:
    declared = SCRIPT.replace("    args = parser.parse_args()\n",
                              '    parser.add_argument("--local_rank", type=int, default=0)\n    args = parser.parse_args()\n')
    result = run_step(local_rank_argument, declared, target="deepspeed")
    assert result.text == result.source
    assert result.findings == ()


def test_a_parser_given_its_own_list_does_not_read_the_launcher_s_arguments() -> None:
    fixed = SCRIPT.replace("parser.parse_args()", 'parser.parse_args(["--lr", "0.2"])')
    result = run_step(local_rank_argument, fixed, target="deepspeed")
    assert result.text == result.source


def test_a_parser_that_declares_only_the_dashed_spelling_learns_the_launcher_s() -> None:
    dashed = SCRIPT.replace("    args = parser.parse_args()\n",
                            '    parser.add_argument("--local-rank", type=int, default=0)\n    args = parser.parse_args()\n')
    result = run_step(local_rank_argument, dashed, target="deepspeed")
    assert result.added == ['    parser.add_argument("--local_rank", "--local-rank", type=int, default=0)']
