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
