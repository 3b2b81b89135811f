"""Help and option messages in the tool's own words, as a newcomer reads them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "mlp_regression" / "train.py"


def migrate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("stage", ["5", "-1", "4"])
def test_a_zero_stage_out_of_range_is_refused_in_the_tools_words(stage: str) -> None:
    result = migrate("to-deepspeed", "--zero", stage, str(SAMPLE))
    assert result.returncode == 2
    assert f"--zero: {stage}: choose a ZeRO stage from 0 to 3" in result.stderr
    assert "Input should be" not in result.stderr  # a validation library's words


def test_nvme_path_help_names_what_it_takes() -> None:
    result = migrate("to-deepspeed", "--help")
    assert "--nvme-path PATH" in result.stdout
    assert "<str>" not in result.stdout


@pytest.mark.parametrize(("target", "said"), [
    ("ddp", "Rewrite the files in place and create the launch script beside each (atomically)."),
    ("fsdp", "Rewrite the files in place and create the launch script beside each (atomically)."),
    ("horovod", "Rewrite the files in place and create the launch script beside each (atomically)."),
    ("deepspeed", "Rewrite the files in place and create the launch script and its config beside each (atomically)."),
    ("dp", "Rewrite the files in place (atomically); no launcher or config is written: the converted script runs "
           "with `python` as before."),
])
def test_write_help_names_what_each_target_writes(target: str, said: str) -> None:
    """to-dp writes no launcher, to-deepspeed also writes its config: each --write help says so."""
    from migrate.cli import write_help
    from migrate.targets import targets

    assert write_help(targets()[target]) == said


def test_to_dp_help_promises_no_launcher() -> None:
    said = " ".join(migrate("to-dp", "--help").stdout.split())
    assert "--write Rewrite the files in place (atomically); no launcher or config is written" in said
    assert "launch script" not in said
