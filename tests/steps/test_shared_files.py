"""shared_files: what every rank would do to the filesystem at once. Deleting and making
directories runs on rank 0 with a barrier after it; a lone makedirs tolerates the directory
another rank made; a file rank 0 saves is loaded only after a barrier."""

from __future__ import annotations

from migrate.steps.rank_zero import rank_zero
from migrate.steps.shared_files import shared_files
from tests.steps.helpers import run_step, run_steps

CLEANS_UP = """\
import os
import shutil

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    shutil.rmtree("old_runs")
    os.makedirs("runs")
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), os.path.join("runs", "model.pt"))
    model.load_state_dict(torch.load(os.path.join("runs", "model.pt")))


if __name__ == "__main__":
    main()
"""


def test_deleting_and_making_directories_run_on_rank_zero_then_every_rank_waits() -> None:
    result = run_step(shared_files, CLEANS_UP)
    assert result.removed == ['    shutil.rmtree("old_runs")', '    os.makedirs("runs")']
    assert result.added == [
        "    if dist.get_rank() == 0:",
        '        shutil.rmtree("old_runs")',
        '        os.makedirs("runs")',
        "    dist.barrier()  # the other ranks wait for the directories rank 0 made",
    ]
    assert result.findings == ()


def test_a_lone_makedirs_tolerates_the_directory_another_rank_made() -> None:
    result = run_step(shared_files, CLEANS_UP.replace('    shutil.rmtree("old_runs")\n', ""))
    assert result.removed == ['    os.makedirs("runs")']
    assert result.added == ['    os.makedirs("runs", exist_ok=True)']
    assert result.findings == ()


def test_a_file_rank_zero_saved_is_loaded_after_a_barrier() -> None:
    """After rank_zero, which moves the torch.save to rank 0 (the DDP target's order)."""
    result = run_steps([rank_zero, shared_files], CLEANS_UP)
    expected = (
        "    if dist.get_rank() == 0:\n"
        '        torch.save(model.state_dict(), os.path.join("runs", "model.pt"))\n'
        '    dist.barrier()  # rank 0 has finished writing os.path.join("runs", "model.pt")\n'
        '    model.load_state_dict(torch.load(os.path.join("runs", "model.pt")))\n'
    )
    assert expected in result.text


def test_a_script_that_only_reads_and_tolerates_existing_directories_is_left_as_it_is() -> None:
    script = (CLEANS_UP.replace('    shutil.rmtree("old_runs")\n', "")
              .replace('os.makedirs("runs")', 'os.makedirs("runs", exist_ok=True)')
              .replace("    torch.save(model.state_dict(), os.path.join(\"runs\", \"model.pt\"))\n", ""))
    result = run_step(shared_files, script)
    assert result.text == result.source
    assert result.findings == ()


def test_deleting_at_import_time_is_reported_not_guarded() -> None:
    """Module-level code runs before main() sets the process group up: no rank can be asked."""
    script = CLEANS_UP.replace('    shutil.rmtree("old_runs")\n', "").replace(
        "TensorDataset\n\n\n", 'TensorDataset\n\nshutil.rmtree("old_runs")\n\n\n')
    result = run_step(shared_files, script)
    assert result.source.splitlines()[7] == 'shutil.rmtree("old_runs")'
    assert result.text == result.source.replace('os.makedirs("runs")', 'os.makedirs("runs", exist_ok=True)')
    assert result.codes == [("MIG120", 8)]


DOWNLOAD_FLAG = """\
import torchvision

DOWNLOAD = False


def main():
    train = torchvision.datasets.MNIST("./mnist", train=True, download=DOWNLOAD)
    print(len(train))


if __name__ == "__main__":
    main()
"""


def test_a_download_flag_that_is_always_false_downloads_nothing() -> None:
    """`download=DOWNLOAD` with `DOWNLOAD = False` throughout: nothing to download, nothing said;
    set to True anywhere, the download is handled (here: reported, as no setup ran before it)."""
    quiet = run_step(shared_files, DOWNLOAD_FLAG)
    assert quiet.text == quiet.source and quiet.findings == ()
    switched = DOWNLOAD_FLAG.replace("DOWNLOAD = False\n", "DOWNLOAD = False\nif True:\n    DOWNLOAD = True\n")
    assert [code for code, _line in run_step(shared_files, switched).codes] == ["MIG120"]
