"""FSDP2 equivalence: every sample, converted by `migrate to-fsdp`, trains the same as before,
saves checkpoints the original loads, and really shards its model.

Per sample, real runs on CPU (gloo), as for DDP (tests/equivalence/test_ddp.py):
  original, `python`, batch 2B, no shuffle            -> the reference
  converted, torchrun x2, batch B, no shuffle         -> must equal the reference
  converted, torchrun x2, batch B, shuffled           -> must equal the next one
  converted, plain `python` (1 process), batch 2B, shuffled
FSDP reduce-scatters gradients and keeps each weight's shards on different ranks: the sums run in
another order than one process's, which torch.testing's float32 tolerances cover (measured: under
4e-6 absolute on these samples).
scripts/test runs DEFAULT_SAMPLES and one case of each other test; scripts/test --full runs them all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from migrate import FsdpOptions, migrate_source
from tests.equivalence.harness import (
    BIN,
    ROOT,
    _finish,
    _launch,
    assert_loads_strictly,
    assert_same_weights,
    final_train_loss,
    loss_lines,
    convert,
    environment,
    full_unless,
    run_python,
    run_torchrun,
    sample_names,
)
from tests.equivalence.test_ddp import BATCHNORM_SAMPLES, LOSS_RTOL  # held to the final loss there (it says why)

pytestmark = pytest.mark.slow

PER_PROCESS_BATCH = 8
EPOCHS = ["--epochs", "2"]
PROBE = ROOT / "tests" / "equivalence" / "fsdp_probe.py"
# scripts/test runs these (accumulation, repeated blocks sharded); the others are `full` (scripts/test
# --full): BatchNorm and checkpoints are run by the resume test, two models by the other targets' tests
DEFAULT_SAMPLES = {"amp_accum", "char_transformer"}


@pytest.mark.parametrize("sample", full_unless(sample_names(), DEFAULT_SAMPLES))
def test_fsdp_sample_trains_like_the_original(sample: str, tmp_path: Path) -> None:
    original, converted = convert(sample, "fsdp", tmp_path)
    batch = ["--batch-size", str(2 * PER_PROCESS_BATCH)]
    half = ["--batch-size", str(PER_PROCESS_BATCH)]

    reference = run_python(original, [*EPOCHS, *batch, "--no-shuffle"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, [*EPOCHS, *half, "--no-shuffle"], tmp_path / "fsdp2.pt")
    shuffled_two = run_torchrun(converted, 2, [*EPOCHS, *half], tmp_path / "fsdp2_shuffled.pt")
    shuffled_one = run_python(converted, [*EPOCHS, *batch], tmp_path / "fsdp1_shuffled.pt")

    # rank 0's checkpoint is the full model with the original keys, on the CPU
    assert_loads_strictly(two_ranks.weights, reference.weights)
    assert len(loss_lines(two_ranks.stdout + two_ranks.stderr)) == len(loss_lines(reference.stdout + reference.stderr))
    if sample in BATCHNORM_SAMPLES:
        expected = final_train_loss(reference.stdout + reference.stderr)
        assert final_train_loss(two_ranks.stdout + two_ranks.stderr) == pytest.approx(expected, rel=LOSS_RTOL)
        return
    assert_same_weights(two_ranks.weights, reference.weights)
    assert_same_weights(shuffled_two.weights, shuffled_one.weights)


def probe_records(folder: Path, nproc: int) -> list[list[dict]]:
    return [[json.loads(line) for line in (folder / f"fsdp_probe.rank{rank}.jsonl").read_text().splitlines()]
            for rank in range(nproc)]


@pytest.mark.parametrize(("sample", "block"), full_unless([("char_transformer", "Block"), ("amp_accum", "ResidualBlock")],
                                                           {("char_transformer", "Block")}))
def test_each_repeated_block_is_sharded_across_the_ranks(sample: str, block: str, tmp_path: Path) -> None:
    _original, converted = convert(sample, "fsdp", tmp_path)
    command = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", str(PROBE), str(converted),
               "--epochs", "1", "--batch-size", "8", "--save", str(tmp_path / "probe.pt")]
    _finish(_launch(command, tmp_path, environment()), tmp_path / "probe.pt")
    ranks = probe_records(tmp_path, 2)
    for events in ranks:
        shards = [e for e in events if e["kind"] == "shard"]
        assert len([e for e in shards if e["module"] == block]) >= 2, [e["module"] for e in shards]
        assert shards[-1]["module"] not in (block,), "the model itself is sharded last"
        for event in shards:
            for name, parameter in event["parameters"].items():
                assert parameter["dtensor"] and parameter["placements"] == ["S(0)"], (event["module"], name)
        # the optimizer steps the sharded parameters, not copies of the whole ones
        steps = [e for e in events if e["kind"] == "step"]
        assert steps and all(p["dtensor"] for p in steps[0]["parameters"])
    # each rank holds its own rows of every parameter; those of a block are really split in two
    for index, event in enumerate(e for e in ranks[0] if e["kind"] == "shard"):
        other = [e for e in ranks[1] if e["kind"] == "shard"][index]
        for name, parameter in event["parameters"].items():
            rows = (parameter["local_shape"][0], other["parameters"][name]["local_shape"][0])
            assert sum(rows) == parameter["shape"][0], name
            assert event["module"] != block or min(rows) > 0, (name, rows)


def test_a_checkpoint_resumes_like_the_original_script_resumes(tmp_path: Path) -> None:
    """cnn_classifier writes model and optimizer state each epoch. Its FSDP checkpoint (2 ranks,
    2 epochs) is resumed for a third epoch by the original script and by the converted one: as one
    process (the converted load path: set_model_state_dict / set_optimizer_state_dict from rank 0)
    the weights are equal; as 2 ranks the final loss agrees (BatchNorm: see BATCHNORM_SAMPLES)."""
    original, converted = convert("cnn_classifier", "fsdp", tmp_path)
    checkpoint = tmp_path / "checkpoint.pt"
    run_torchrun(converted, 2, ["--batch-size", "8", "--no-shuffle", "--epochs", "2", "--checkpoint", str(checkpoint)],
                 tmp_path / "two.pt")
    resume = ["--no-shuffle", "--epochs", "3", "--resume", str(checkpoint)]
    by_original = run_python(original, [*resume, "--batch-size", "16"], tmp_path / "original_resumed.pt")
    one_rank = run_torchrun(converted, 1, [*resume, "--batch-size", "16"], tmp_path / "one_rank_resumed.pt")
    two_ranks = run_torchrun(converted, 2, [*resume, "--batch-size", "8"], tmp_path / "two_ranks_resumed.pt")
    assert "resumed from" in by_original.stderr and "resumed from" in two_ranks.stderr
    assert_same_weights(one_rank.weights, by_original.weights)
    assert_loads_strictly(two_ranks.weights, by_original.weights)
    expected = final_train_loss(by_original.stderr)
    assert final_train_loss(two_ranks.stderr) == pytest.approx(expected, rel=LOSS_RTOL)

    # and the other way: a checkpoint the original script wrote (its optimizer state numbers the
    # parameters) resumes in the converted script, as it does in the original
    original_checkpoint = tmp_path / "original_checkpoint.pt"
    run_python(original, ["--batch-size", "16", "--no-shuffle", "--epochs", "2", "--checkpoint", str(original_checkpoint)],
               tmp_path / "original_two.pt")
    resume = ["--no-shuffle", "--epochs", "3", "--batch-size", "16", "--resume", str(original_checkpoint)]
    by_original = run_python(original, resume, tmp_path / "original_resumed_own.pt")
    one_rank = run_torchrun(converted, 1, [*resume, "--checkpoint", str(tmp_path / "next.pt")], tmp_path / "one_rank_own.pt")
    assert_same_weights(one_rank.weights, by_original.weights)


def test_mixed_precision_and_cpu_offload_train_and_save_full_weights(tmp_path: Path) -> None:
    """--mixed-precision bf16 --cpu-offload on a CPU host: the policies build (pinned memory only
    with a GPU), training runs, and the checkpoint holds the full fp32 weights."""
    original, converted = convert("char_transformer", "fsdp", tmp_path, FsdpOptions(mixed_precision="bf16", cpu_offload=True))
    text = converted.read_text()
    assert "MixedPrecisionPolicy(param_dtype=torch.bfloat16" in text and "CPUOffloadPolicy(" in text
    args = ["--epochs", "1", "--batch-size", "8", "--no-shuffle"]
    reference = run_python(original, ["--epochs", "1", "--batch-size", "16", "--no-shuffle"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, args, tmp_path / "mixed.pt")
    assert_loads_strictly(two_ranks.weights, reference.weights)
    # bf16 compute lands near the fp32 run, not on it
    expected = final_train_loss(reference.stdout)
    assert final_train_loss(two_ranks.stdout) == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize("sample", full_unless(["amp_accum", "char_transformer", "trainer_class"], {"amp_accum"}))
def test_a_script_already_on_ddp_moves_to_fsdp_and_trains_the_same(sample: str, tmp_path: Path) -> None:
    """The sample's own DDP conversion, converted again by to-fsdp (the wrapper swapped, `.module`
    gone, no_sync replaced, checkpoints gathered above its rank-0 guards), against the original."""
    original, on_ddp = convert(sample, "ddp", tmp_path)
    result = migrate_source(on_ddp.read_text(), "fsdp", path=str(on_ddp))
    assert "MIG305" in {f.code for f in result.findings} and "DistributedDataParallel" not in result.new
    on_fsdp = tmp_path / "on_fsdp.py"
    on_fsdp.write_text(result.new)
    reference = run_python(original, [*EPOCHS, "--batch-size", str(2 * PER_PROCESS_BATCH), "--no-shuffle"],
                           tmp_path / "original.pt")
    two_ranks = run_torchrun(on_fsdp, 2, [*EPOCHS, "--batch-size", str(PER_PROCESS_BATCH), "--no-shuffle"],
                             tmp_path / "fsdp2.pt")
    assert_same_weights(two_ranks.weights, reference.weights)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("sample", ["char_transformer", "amp_accum", "trainer_class"])
def test_fsdp_sample_on_one_gpu_over_nccl(sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """World size 1 on NCCL against the original on the same GPU: FSDP2's default mesh is the GPU's,
    the model is moved there at the shard (trainer_class moves it only later), the checkpoint is
    gathered to the CPU."""
    monkeypatch.setenv("MIGRATE_TEST_CUDA", "1")
    original, converted = convert(sample, "fsdp", tmp_path)
    args = [*EPOCHS, "--batch-size", "16", "--no-shuffle"]
    reference = run_python(original, args, tmp_path / "original.pt")
    one_gpu = run_torchrun(converted, 1, args, tmp_path / "fsdp1.pt")
    assert_loads_strictly(one_gpu.weights, reference.weights)
    assert_same_weights(one_gpu.weights, reference.weights)
