"""rank_zero and shared_files after teardown: once the training function has torn the process group
down and returned, the `__main__` block's saves and figures run on rank 0 (asked of the launcher's
RANK), and a file saved there and loaded again is loaded only by rank 0, after it wrote it."""

from __future__ import annotations

from migrate.steps.rank_zero import rank_zero
from migrate.steps.shared_files import shared_files
from tests.steps.helpers import run_steps

SAVED_AFTER_MAIN = """\
import torch
import torch.nn as nn
import matplotlib.pyplot as plt


def train():
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


if __name__ == "__main__":
    net = train()
    torch.save(net.state_dict(), "weights.pt")
    plt.savefig("curve.png")
    again = nn.Linear(4, 1)
    again.load_state_dict(torch.load("weights.pt"))
    print(again.weight)
"""

LAUNCHER_TEST = 'if os.environ.get("RANK", "0") == "0":'


def test_writes_after_the_training_function_returns_run_on_rank_zero() -> None:
    result = run_steps([rank_zero, shared_files], SAVED_AFTER_MAIN)
    lines = result.text.splitlines()
    save = next(i for i, line in enumerate(lines) if "torch.save(" in line)
    assert lines[save - 1].strip() == LAUNCHER_TEST
    assert lines[save + 1].strip() == 'plt.savefig("curve.png")'  # under the same `if`
    assert lines[save + 1].startswith("        ")


def test_the_reload_after_teardown_runs_on_rank_zero_with_what_follows() -> None:
    result = run_steps([rank_zero, shared_files], SAVED_AFTER_MAIN)
    lines = result.text.splitlines()
    load = next(i for i, line in enumerate(lines) if "torch.load(" in line)
    assert lines[load - 1].strip() == LAUNCHER_TEST
    assert lines[load - 2].strip() == "again = nn.Linear(4, 1)"  # built on every rank, as before
    assert lines[load + 1].strip() == "print(again.weight)" and lines[load + 1].startswith("        ")
    assert "dist.barrier()" not in result.text  # no process group is left to wait in
    assert result.codes == []


def test_a_save_before_training_is_left_to_every_rank() -> None:
    early = SAVED_AFTER_MAIN.replace('    net = train()\n', '').replace('    print(again.weight)\n', '    net = train()\n')
    result = run_steps([rank_zero, shared_files], early)
    assert LAUNCHER_TEST not in result.text
