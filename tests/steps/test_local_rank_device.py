"""local_rank_device: a GPU the script numbers itself (`cuda:0`, `.cuda()`, `set_device(0)`)
would put every rank on one GPU; it becomes the local rank's, with a CPU fallback. A device the
script already chooses by availability is kept."""

from __future__ import annotations

from migrate.steps.init_process_group import setup
from migrate.steps.local_rank_device import local_rank_device
from tests.steps.helpers import run_step, run_steps

NUMBERED = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    device = torch.device("cuda:0")
    torch.cuda.set_device(0)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

CHOSEN = NUMBERED.replace('torch.device("cuda:0")', 'torch.device("cuda" if torch.cuda.is_available() else "cpu")').replace(
    "    torch.cuda.set_device(0)\n", "").replace(".cuda()", ".to(device)")


def test_a_numbered_gpu_becomes_the_local_rank_s_and_set_device_goes() -> None:
    result = run_step(local_rank_device, NUMBERED)
    assert result.removed == [
        '    device = torch.device("cuda:0")',
        "    torch.cuda.set_device(0)",
        "    model = nn.Linear(4, 1).cuda()",
    ]
    assert result.added == [
        '    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")',
        "    model = nn.Linear(4, 1).to(device)",
    ]
    assert result.findings == ()


def test_after_setup_the_rewritten_device_reads_setup_s_local_rank() -> None:
    """After setup (the DDP target's order): `local_rank` is bound right above."""
    result = run_steps([setup, local_rank_device], NUMBERED)
    expected = (
        '    local_rank = int(os.environ["LOCAL_RANK"])\n'
        "    if torch.cuda.is_available():\n"
        "        torch.cuda.set_device(local_rank)\n"
        '    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")\n'
        "\n"
        '    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")\n'
        "    loader = DataLoader("
    )
    assert expected in result.text
    assert "torch.cuda.set_device(0)" not in result.text


def test_a_device_chosen_by_availability_is_kept() -> None:
    result = run_step(local_rank_device, CHOSEN)
    assert result.text == result.source
    assert result.findings == ()
