"""Sharded parameters are gathered for the cross-rank check, and every parameter must train.

Fast: digests (a sparse input no longer breaks them), wrapper prefixes, and the checks on
hand-made records (parameters gathered per step; a parameter that trains in one run and not the
other is named). Slow: `migrate verify --compare --target fsdp` on
tests/verify/scripts/embed_train.py with its right FSDP2 conversion (the parameter check now
gathers the shards and passes) and with one that builds the optimizer before `fully_shard`
(nothing trains: each parameter is named, the embedding first).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.verify.checks import Launch, RankRecord, check_compare, check_parameters

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.mark.filterwarnings("ignore::UserWarning")  # sparse tensors are beta in torch
def test_a_sparse_input_is_digested_not_refused() -> None:
    torch = pytest.importorskip("torch")
    from migrate.verify.params import digest

    indices = torch.tensor([[0, 1, 2], [2, 0, 1]])
    first = torch.sparse_coo_tensor(indices, torch.tensor([1.0, 2.0, 3.0]), (3, 3))
    same = torch.sparse_coo_tensor(indices, torch.tensor([1.0, 2.0, 3.0]), (3, 3))
    other = torch.sparse_coo_tensor(indices, torch.tensor([1.0, 2.0, 4.0]), (3, 3))
    assert digest([first]) == digest([same]) != digest([other])
    assert digest([first.to_sparse_csr()]) == digest([first.to_dense()])


def test_parameter_names_lose_the_wrappers_prefixes() -> None:
    from migrate.verify.params import clean_name

    assert clean_name("module._orig_mod.embed.weight") == "embed.weight"
    assert clean_name("_fsdp_wrapped_module.head._checkpoint_wrapped_module.bias") == "head.bias"


def record(rank: int, *events: dict) -> RankRecord:
    return RankRecord(rank, [{"kind": "start", "root": "/w"}, *events], "")


def params(step: int, digest: str, trained: list[list[str]] = (), frozen: list[list[str]] = ()) -> dict:
    return {"kind": "params", "step": step, "params": {"0:Net": digest}, "trained": list(trained),
            "frozen": list(frozen), "sharded": True}


def launch(*records: RankRecord, folder: str = "") -> Launch:
    return Launch(returncode=0, output="", records={r.rank: r for r in records}, timed_out=False, folder=folder)


def test_gathered_parameters_are_compared_across_ranks_step_by_step() -> None:
    same = launch(record(0, params(1, "a"), params(2, "b")), record(1, params(1, "a"), params(2, "b")))
    check = check_parameters(same, 2)
    assert check.status == "passed"
    assert check.detail == ["identical on 2 ranks after each of 2 steps (sharded parameters gathered from every rank)"]
    apart = launch(record(0, params(1, "a"), params(2, "b")), record(1, params(1, "a"), params(2, "c")))
    assert "after step 2 the parameters of Net differ" in check_parameters(apart, 2).detail[0]


def test_a_parameter_that_trains_in_one_run_only_is_named(tmp_path: Path) -> None:
    original = launch(record(0, params(1, "a", trained=[["0:Net", "embed.weight"], ["0:Net", "head.weight"]])))
    converted = launch(record(0, params(1, "b", trained=[["0:Net", "head.weight"]], frozen=[["0:Net", "embed.weight"]])),
                       folder=str(tmp_path))
    check = check_compare(original, converted, 1)
    assert check.status == "failed"
    assert check.detail == ["Net.embed.weight trains in the original and not in the converted run (unchanged after its steps)"]
    reverse = check_compare(launch(record(0, params(1, "b", frozen=[["0:Net", "embed.weight"]]))),
                            launch(record(0, params(1, "a", trained=[["0:Net", "embed.weight"]])), folder=str(tmp_path)), 1)
    assert reverse.detail == ["Net.embed.weight trains in the converted run and not in the original"]


# -- through `migrate verify` ------------------------------------------------------------------
RIGHT = (SCRIPTS / "embed_train_fsdp.py").read_text()
OPTIMIZER_FIRST = RIGHT.replace(
    "    fully_shard(model)\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)\n",
    "    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)\n    fully_shard(model)\n")


def verify(folder: Path, converted: str) -> tuple[int, dict]:
    shutil.copy(SCRIPTS / "embed_train.py", folder / "train.py")
    (folder / "converted.py").write_text(converted)
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", "--compare", "--target", "fsdp",
               "--converted", str(folder / "converted.py"), str(folder / "train.py")]
    process = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert process.stdout, process.stderr
    return process.returncode, json.loads(process.stdout)


def checks(report: dict) -> dict[str, tuple[str, list[str]]]:
    return {c["name"]: (c["status"], c["detail"]) for c in report["checks"]}


@pytest.mark.slow
@pytest.mark.full  # the embedding test below gathers the same FSDP2 weights
def test_fsdp_parameters_are_gathered_and_the_right_conversion_passes(tmp_path: Path) -> None:
    code, report = verify(tmp_path, RIGHT)
    assert code == 0, json.dumps(report, indent=1)
    status, detail = checks(report)["parameters"]
    assert status == "passed" and "sharded parameters gathered from every rank" in detail[0]
    assert checks(report)["compare"][0] == "passed"


@pytest.mark.slow
def test_an_fsdp_embedding_that_never_trains_is_named(tmp_path: Path) -> None:
    assert OPTIMIZER_FIRST != RIGHT
    code, report = verify(tmp_path, OPTIMIZER_FIRST)
    assert code == 1, json.dumps(report, indent=1)
    status, detail = checks(report)["compare"]
    assert status == "failed"
    assert "Net.embed.weight trains in the original and not in the converted run (unchanged after its steps)" in detail
    assert "Net.head.weight trains in the original and not in the converted run (unchanged after its steps)" in detail


@pytest.mark.slow
def test_zero3_partitions_are_gathered_for_the_parameter_check_and_the_weights(tmp_path: Path) -> None:
    pytest.importorskip("deepspeed")
    shutil.copy(Path(__file__).parents[2] / "samples" / "mlp_regression" / "train.py", tmp_path / "train.py")
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", "--compare", "--target", "deepspeed",
               "--zero", "3", str(tmp_path / "train.py"), "--", "--epochs", "1"]
    process = subprocess.run(command, capture_output=True, text=True, timeout=500)
    report = json.loads(process.stdout)
    assert process.returncode == 0, json.dumps(report, indent=1)
    status, detail = checks(report)["parameters"]
    assert status == "passed" and "sharded parameters gathered from every rank" in detail[0]
    status, detail = checks(report)["compare"]
    assert status == "passed" and any(line.startswith("weights after the last step: max |difference|") for line in detail)
