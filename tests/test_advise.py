"""`migrate advise`: each branch of the guide's decision tree, the memory table against DeepSpeed's
own estimators, the command line (through a Typer app of this test that registers the command),
and bad input."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from migrate.advise import GIB, RULES, Cluster, Model, decide, memory_table
from migrate.advise_command import advise

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "char_transformer" / "train.py"

app = typer.Typer()
app.command("advise")(advise)


@app.callback()
def _group() -> None:
    """Two commands' worth of structure, so `advise` is a subcommand as under `migrate`."""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["advise", *args])
    return result.exit_code, result.stdout, result.stderr


def run_json(*args: str) -> dict:  # type: ignore[type-arg]
    code, out, err = run(*args, "--report", "json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


# -- the decision tree, branch by branch --------------------------------------------------------------

def test_rule_1_one_node_is_ddp_with_dp_runner_up() -> None:
    found = run_json("--params", "350M", "--nodes", "1", "--gpus-per-node", "8", "--gpu-memory", "80GB")
    assert (found["recommendation"], found["rule"]["number"], found["runner_up"]["framework"]) == ("ddp", 1, "dp")
    assert found["rule"]["text"] == RULES[1]
    assert found["commands"] == ["migrate to-ddp --write SCRIPT",
                                 "# --write also writes run_<script>_ddp.sh beside it: one process per GPU of this node"]


def test_rule_2_several_nodes_small_model_is_ddp() -> None:
    found = run_json("--params", "350M", "--nodes", "4", "--gpus-per-node", "8", "--gpu-memory", "80GB")
    assert (found["recommendation"], found["rule"]["number"], found["runner_up"]["framework"]) == ("ddp", 2, "horovod")


@pytest.mark.parametrize("flag", ["--mpi", "--other-frameworks"])
def test_rule_2_horovod_with_mpi_or_other_frameworks(flag: str) -> None:
    found = run_json("train.py", "--params", "350M", "--nodes", "4", "--gpus-per-node", "8", "--gpu-memory", "80GB", flag)
    assert (found["recommendation"], found["rule"]["number"], found["runner_up"]["framework"]) == ("horovod", 2, "ddp")
    assert found["commands"] == ["migrate to-horovod --write train.py",
                                 "migrate launch horovod train.py --hosts node1:8,node2:8,node3:8,..."]


@pytest.mark.parametrize(("params", "nodes"), [("350M", "10"), ("13B", "2")])
def test_rule_3_ten_nodes_or_10b_is_deepspeed(params: str, nodes: str) -> None:
    found = run_json("--params", params, "--nodes", nodes, "--gpus-per-node", "8", "--gpu-memory", "80GB")
    assert (found["recommendation"], found["rule"]["number"], found["runner_up"]["framework"]) == ("deepspeed", 3, "fsdp")
    assert found["commands"][0].startswith("migrate to-deepspeed --zero ")


def test_rule_4_memory_tight_is_fsdp() -> None:
    """7B in bf16 with Adam: 112 GB of model states under DDP, over 80 GB; FSDP's shard fits."""
    found = run_json("train.py", "--params", "7B", "--nodes", "1", "--gpus-per-node", "8", "--gpu-memory", "80GB")
    assert (found["recommendation"], found["rule"]["number"], found["runner_up"]["framework"]) == ("fsdp", 4, "deepspeed")
    assert found["commands"] == ["migrate to-fsdp --mixed-precision bf16 --write train.py",
                                 "# --write also writes run_train_fsdp.sh beside it: one process per GPU of this node"]
    fits = {row["strategy"]: row["fits"] for row in found["memory"]}
    assert fits["DDP"] is False and fits["FSDP (FULL_SHARD)"] is True


def test_nothing_sharded_fits_is_deepspeed_with_offload() -> None:
    """7B on one 24 GB GPU: not even FSDP's full shard fits; ZeRO-3 with CPU offload does."""
    found = run_json("--params", "7B", "--gpus-per-node", "1", "--gpu-memory", "24GB")
    assert (found["recommendation"], found["rule"]["number"]) == ("deepspeed", 3)
    assert "--zero 3 --offload-optimizer cpu --offload-param cpu" in found["commands"][0]


def test_no_rule_covers_a_mid_size_model_on_several_nodes() -> None:
    """3B on 4 nodes: not under 1B (rule 2), not 10B+ (rule 3), 48 GB fits 80 GB (not rule 4)."""
    advice = decide(Model(3 * 10 ** 9), Cluster(4, 8, 80 * GIB))
    assert (advice.recommendation, advice.rule, advice.runner_up) == ("ddp", None, "fsdp")


def test_unknown_size_says_which_rules_were_not_checked() -> None:
    found = run_json("--nodes", "3", "--gpus-per-node", "8", "--gpu-memory", "80GB")
    assert found["recommendation"] == "ddp" and found["rule"]["number"] is None and found["memory"] == []
    assert any("not known" in note for note in found["notes"])


# -- the memory table against DeepSpeed's estimators --------------------------------------------------

SHAPES = [(1, 1), (1, 8), (2, 8), (16, 4)]
SIZES = [(125 * 10 ** 6, 10 ** 6), (7 * 10 ** 9, 131 * 10 ** 6), (70 * 10 ** 9, 10 ** 9)]


@pytest.mark.parametrize("nodes,gpus", SHAPES)
@pytest.mark.parametrize("params,largest", SIZES)
def test_memory_table_matches_deepspeed(nodes: int, gpus: int, params: int, largest: int) -> None:
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    rows = {row.strategy: row for row in memory_table(Model(params, largest), Cluster(nodes, gpus, 80 * GIB))}
    _cpu, zero2 = estimate_zero2_model_states_mem_needs(params, gpus, nodes, cpu_offload=False)
    _cpu, zero3, _layer = estimate_zero3_model_states_mem_needs(params, largest, gpus, nodes, cpu_offload=False,
                                                                cpu_offload_params=False)
    offload_cpu, offload_gpu, _layer = estimate_zero3_model_states_mem_needs(params, largest, gpus, nodes)
    assert rows["ZeRO-2"].gpu_bytes == pytest.approx(zero2, rel=0.01)
    assert rows["ZeRO-3"].gpu_bytes == pytest.approx(zero3, rel=0.01)
    assert rows["ZeRO-3 + CPU offload"].gpu_bytes == pytest.approx(offload_gpu, rel=0.01)
    assert rows["ZeRO-3 + CPU offload"].cpu_bytes_per_node == pytest.approx(offload_cpu, rel=0.01)


def test_memory_table_matches_the_printed_all_cold_estimates() -> None:
    """The `_all_cold` functions print their table (in 2**30-byte GB): read it back."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs_all_cold

    params, largest = 13 * 10 ** 9, 200 * 10 ** 6
    rows = {row.strategy: row for row in memory_table(Model(params, largest), Cluster(2, 8, 80 * GIB))}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        estimate_zero2_model_states_mem_needs_all_cold(params, num_gpus_per_node=8, num_nodes=2)
        estimate_zero3_model_states_mem_needs_all_cold(params, largest, num_gpus_per_node=8, num_nodes=2)
    gpu = {options: float(size) * GIB for size, options in
           re.findall(r"\|\s+([\d.]+)GB \| (offload_param=\w+\s*, offload_optimizer=none, zero_init=1|"
                      r"offload_optimizer=none)$", printed.getvalue(), re.MULTILINE)}
    assert rows["ZeRO-2"].gpu_bytes == pytest.approx(gpu["offload_optimizer=none"], rel=0.01)
    assert rows["ZeRO-3"].gpu_bytes == pytest.approx(gpu["offload_param=none, offload_optimizer=none, zero_init=1"],
                                                      rel=0.01)


def test_ddp_and_fsdp_follow_the_zero_papers_accounting() -> None:
    """Mixed-precision Adam: 2 + 2 + 12 = 16 bytes a parameter under DDP; fp32 Adam 4 + 4 + 8; SGD
    with momentum in bf16 2 + 2 + 8; FSDP's full shard 16/N plus the largest layer gathered."""
    cluster = Cluster(1, 4, 80 * GIB)
    def row(model: Model, name: str) -> int:
        return next(r.gpu_bytes for r in memory_table(model, cluster) if r.strategy == name)
    assert row(Model(10 ** 9, 0), "DDP") == 16 * 10 ** 9
    assert row(Model(10 ** 9, 0, "fp32"), "DDP") == 16 * 10 ** 9
    assert row(Model(10 ** 9, 0, "bf16", "sgd"), "DDP") == 12 * 10 ** 9
    assert row(Model(10 ** 9, 0, "fp32", "sgd"), "ZeRO-2") == 4 * 10 ** 9 + 8 * 10 ** 9 // 4
    assert row(Model(10 ** 9, 10 ** 6), "FSDP (FULL_SHARD)") == 16 * 10 ** 9 // 4 + 4 * 10 ** 6


# -- the command line ---------------------------------------------------------------------------------

def test_text_report_with_a_script() -> None:
    from migrate.param_count import count_file

    code, out, err = run(str(SAMPLE), "--nodes", "2", "--gpus-per-node", "4", "--gpu-memory", "24GB")
    assert code == 0, err
    assert out.startswith("recommendation: ddp\n")
    assert f'"{RULES[2]}"' in out
    assert "runner-up: horovod:" in out
    assert f"migrate to-ddp --write {SAMPLE}" in out
    assert f"migrate launch ddp {SAMPLE} --nnodes 2 --nproc-per-node 4 --master-addr NODE1_ADDRESS" in out
    assert "activations come on top" in out
    assert f"({count_file(str(SAMPLE)).total / 1000:.3g}K parameters" in out


def test_json_report_of_a_script_counts_it() -> None:
    found = run_json(str(SAMPLE), "--gpus-per-node", "2", "--gpu-memory", "16GB")
    assert found["inputs"]["params_from"] == "script" and found["inputs"]["params"] > 0
    assert found["inputs"]["largest_layer"] > 0
    assert [row["strategy"] for row in found["memory"]] == ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3",
                                                            "ZeRO-3 + CPU offload", "FSDP (FULL_SHARD)"]


def test_unsized_layers_are_listed(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nimport torch.nn as nn\n\n\ndef main(width):\n"
                      "    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, width))\n"
                      "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                      "    model(torch.zeros(1, 4)).sum().backward()\n    opt.step()\n")
    code, out, _err = run(str(script), "--gpus-per-node", "2", "--gpu-memory", "16GB")
    assert code == 0
    assert f"not sized (counted as 0): {script}:6:" in out
    assert "the count is a lower bound" in out


# -- bad input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "said"), [
    (["--gpu-memory", "80XB", "--gpus-per-node", "8"], "--gpu-memory: '80XB' is not a memory size"),
    (["--nodes", "0", "--gpus-per-node", "8", "--gpu-memory", "80GB"], "--nodes: 0: give 1 or more"),
    (["--gpus-per-node", "0", "--gpu-memory", "80GB"], "--gpus-per-node: 0: give 1 or more"),
    (["--params", "7Q", "--gpus-per-node", "8", "--gpu-memory", "80GB"], "--params: '7Q' is not a parameter count"),
    (["--precision", "fp8", "--gpus-per-node", "8", "--gpu-memory", "80GB"], "--precision: 'fp8': give one of"),
    (["--gpus-per-node", "8"], "--gpu-memory: give the memory of one GPU"),
])
def test_bad_options_exit_2_naming_the_option(args: list[str], said: str) -> None:
    code, out, err = run(*args)
    assert (code, out) == (2, "")
    assert err.startswith(f"migrate advise: error: {said}")


def test_bad_option_under_json_is_one_json_document() -> None:
    code, out, err = run("--gpu-memory", "80XB", "--gpus-per-node", "8", "--report", "json")
    assert (code, out) == (2, "")
    [entry] = json.loads(err)
    assert entry["code"] == "MIG900" and entry["message"].startswith("--gpu-memory: '80XB'")


def test_script_that_does_not_parse_names_the_users_path(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\ndef f(:\n")
    code, out, err = run(str(script), "--gpus-per-node", "8", "--gpu-memory", "80GB")
    assert (code, out) == (2, "")
    assert err.startswith(f"migrate advise: error: {script}:2:")


def test_missing_script_is_bad_input(tmp_path: Path) -> None:
    code, _out, err = run(str(tmp_path / "nope.py"), "--gpus-per-node", "8", "--gpu-memory", "80GB")
    assert code == 2 and err.startswith(f"migrate advise: error: {tmp_path / 'nope.py'}: ")
