"""The golden case model_returned_then_saved run for real (torchrun, 2 ranks, gloo): fit() returns
the trained network and the `__main__` block saves it, then loads the file into a fresh network.

Before the teardown followed the caller's use, the FSDP gather there ran after
`dist.destroy_process_group()` (RuntimeError on 2 ranks). Now DDP and FSDP save the weights a
one-process run of the original learns at twice the batch, under the original keys (the script's
own `check.load_state_dict(...)` loads them strictly).
Marked `full` (CI budget): scripts/test --full runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate import migrate_source
from tests.equivalence.harness import assert_same_weights, run_python, run_torchrun

pytestmark = [pytest.mark.slow, pytest.mark.full]

CASE = Path(__file__).resolve().parents[1] / "cases" / "model_returned_then_saved" / "input.py"


@pytest.mark.parametrize("target", ["ddp", "fsdp"])
def test_the_returned_model_saved_by_the_caller_equals_the_original(tmp_path: Path, target: str) -> None:
    source = CASE.read_text()
    original, converted = tmp_path / "original.py", tmp_path / "converted.py"
    original.write_text(source)
    result = migrate_source(source, target, path=str(converted))
    assert not result.skipped and result.new != source, [f.message for f in result.findings]
    converted.write_text(result.new)
    reference = run_python(original, ["--batch-size", "12"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, ["--batch-size", "6"], tmp_path / f"{target}.pt")
    assert_same_weights(two_ranks.weights, reference.weights)
    assert "reloaded 129 weights" in two_ranks.stdout
