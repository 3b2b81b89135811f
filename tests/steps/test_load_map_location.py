"""load_map_location: `torch.load` without map_location would restore every rank's tensors onto
the GPU they were saved from; each rank loads onto its own device instead."""

from __future__ import annotations

from migrate.steps.init_process_group import setup
from migrate.steps.load_map_location import load_map_location
from tests.steps.helpers import run_step, run_steps

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1).to(device)
    model.load_state_dict(torch.load("pretrained.pt"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.load_state_dict(torch.load("optimizer.pt", map_location="cpu"))
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

WITHOUT_DEVICE = (SCRIPT.replace('    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n', "")
                  .replace(".to(device)", "")
                  .replace('    optimizer.load_state_dict(torch.load("optimizer.pt", map_location="cpu"))\n', ""))


def test_a_load_goes_to_the_script_s_device_and_a_given_map_location_is_kept() -> None:
    result = run_step(load_map_location, SCRIPT)
    assert result.removed == ['    model.load_state_dict(torch.load("pretrained.pt"))']
    assert result.added == ['    model.load_state_dict(torch.load("pretrained.pt", map_location=device))']
    assert result.findings == ()


def test_without_a_device_variable_the_local_rank_s_device_follows_setup() -> None:
    """After setup (the DDP target's order): the device it adds reads setup's `local_rank`."""
    result = run_steps([setup, load_map_location], WITHOUT_DEVICE)
    expected = (
        '    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")\n'
        '    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")\n'
        "\n"
        "    loader = DataLoader("
    )
    assert expected in result.text
    assert '    model.load_state_dict(torch.load("pretrained.pt", map_location=device))\n' in result.text


def test_a_script_that_loads_nothing_is_left_as_it_is() -> None:
    script = WITHOUT_DEVICE.replace('    model.load_state_dict(torch.load("pretrained.pt"))\n', "")
    result = run_step(load_map_location, script)
    assert result.text == result.source
    assert result.findings == ()


def test_a_checkpoint_read_through_a_name_goes_to_the_device_and_a_data_file_stays_where_it_was_saved() -> None:
    # `ckpt` reaches load_state_dict: mapped; the data file's tensors are the CPU tensors the
    # script reads (`.numpy()` on a GPU tensor fails): left as they are
    script = SCRIPT.replace(
        '    model.load_state_dict(torch.load("pretrained.pt"))\n',
        '    ckpt = torch.load("pretrained.pt")\n    model.load_state_dict(ckpt["model"])\n'
        '    features, labels = torch.load("table.pt")\n    print(features.numpy().mean())\n')
    result = run_step(load_map_location, script)
    assert result.added == ['    ckpt = torch.load("pretrained.pt", map_location=device)']
    assert '    features, labels = torch.load("table.pt")\n' in result.text
