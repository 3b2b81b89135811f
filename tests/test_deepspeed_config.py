"""The DeepSpeed target's generated files: configs DeepSpeed itself accepts, batch arithmetic
that holds, options refused where DeepSpeed would refuse them, a launcher per topology."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate import DeepSpeedOptions, migrate_source

CASES = Path(__file__).parent / "cases"
VARIANTS = CASES / "_deepspeed_configs"
CONFIGS = sorted(CASES.glob("*/deepspeed.ds_config.json")) + sorted(VARIANTS.glob("*.ds_config.json"))
MAIN_CASE = CASES / "main_function" / "input.py"
# One script under each ZeRO stage / offload / precision choice: _deepspeed_configs/<name>.options.json
# holds the DeepSpeedOptions, _deepspeed_configs/<name>.ds_config.json the reviewed config. Only the config
# differs: the script itself must come out exactly as the main_function golden case's deepspeed.py.
OPTION_CASES = sorted(VARIANTS.glob("*.options.json"))


@pytest.mark.parametrize("config_path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_deepspeed_parses_every_golden_config(config_path: Path) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig

    values = json.loads(config_path.read_text())
    config = DeepSpeedConfig(values)  # one process: world size 1
    assert config.train_micro_batch_size_per_gpu == values["train_micro_batch_size_per_gpu"]
    assert config.gradient_accumulation_steps == values["gradient_accumulation_steps"]
    assert config.train_batch_size == config.train_micro_batch_size_per_gpu * config.gradient_accumulation_steps
    assert config.zero_optimization_stage == values["zero_optimization"]["stage"]
    assert config.gradient_clipping == values["gradient_clipping"]
    assert '"auto"' not in config_path.read_text()


@pytest.mark.parametrize("options_path", OPTION_CASES, ids=lambda p: p.name.removesuffix(".options.json"))
def test_each_stage_and_offload_choice_gives_its_reviewed_config(options_path: Path) -> None:
    options = DeepSpeedOptions(**json.loads(options_path.read_text()))
    result = migrate_source(MAIN_CASE.read_text(), "deepspeed", options, path="train.py")
    # offloading the optimizer's state changes the script too (Adam becomes DeepSpeedCPUAdam), the
    # same way for every stage and device: one reviewed script for all those choices
    offloaded = options.offload_optimizer != "none"
    expected = VARIANTS / "offloaded_optimizer.py" if offloaded else MAIN_CASE.with_name("deepspeed.py")
    assert result.new == expected.read_text()
    config = next(a.text for a in result.artifacts if a.path.endswith("ds_config.json"))
    assert config == options_path.with_name(options_path.name.replace(".options.json", ".ds_config.json")).read_text()


def test_values_come_from_the_script() -> None:
    source = (Path(__file__).parents[1] / "samples" / "amp_accum" / "train.py").read_text()
    result = migrate_source(source, "deepspeed", DeepSpeedOptions(zero=1))
    config = json.loads(next(a.text for a in result.artifacts if a.path.endswith("ds_config.json")))
    assert config["train_micro_batch_size_per_gpu"] == 16  # argparse default of --batch-size
    assert config["gradient_accumulation_steps"] == 2  # --accum-steps
    assert config["gradient_clipping"] == 1.0  # --max-grad-norm
    assert config["torch_autocast"] == {"enabled": True, "dtype": "float16"}  # the script's GradScaler: torch AMP
    assert not config["fp16"]["enabled"] and not config["bf16"]["enabled"]  # DeepSpeed's own modes cast the weights
    for line in ('ds_config["train_micro_batch_size_per_gpu"] = args.batch_size',
                 'ds_config["gradient_accumulation_steps"] = args.accum_steps',
                 'ds_config["gradient_clipping"] = args.max_grad_norm',
                 'ds_config["torch_autocast"]["enabled"] = use_amp'):
        assert line in result.new
    assert "clip_grad_norm_(" not in result.new and "GradScaler(" not in result.new
    assert "with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):" in result.new  # kept


def test_no_clipping_in_the_script_means_none_in_the_config() -> None:
    result = migrate_source(MAIN_CASE.read_text(), "deepspeed")
    config = json.loads(next(a.text for a in result.artifacts if a.path.endswith("ds_config.json")))
    assert config["gradient_clipping"] == 0.0  # DeepSpeed's default (1.0) would silently clip


def migrate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("options, message", [
    (["--zero", "2", "--offload-param", "cpu"], "needs ZeRO stage 3"),
    (["--zero", "0", "--offload-optimizer", "cpu"], "needs ZeRO stage 1, 2 or 3"),
    (["--zero", "4"], "--zero"),
    (["--bf16", "--fp16"], "choose one"),
    (["--hosts", "node1:8,$(reboot)"], "HOST:GPUS"),
])
def test_impossible_options_are_refused(tmp_path: Path, options: list[str], message: str) -> None:
    shutil.copy(MAIN_CASE, tmp_path / "train.py")
    result = migrate("to-deepspeed", *options, "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr


def test_several_nodes_get_a_hostfile_and_a_multi_node_launcher(tmp_path: Path) -> None:
    shutil.copy(MAIN_CASE, tmp_path / "train.py")
    result = migrate("to-deepspeed", "--write", "--hosts", "node1:8,node2:4", "--config-out", "conf/ds.json", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "hostfile").read_text() == "node1 slots=8\nnode2 slots=4\n"
    launcher = (tmp_path / "run_train_deepspeed_hosts.sh").read_text()
    assert "--num_nodes 2" in launcher and "MASTER_ADDR:-node1" in launcher
    assert json.loads((tmp_path / "conf" / "ds.json").read_text())["zero_optimization"]["stage"] == 2
    assert '"conf/ds.json"' in (tmp_path / "train.py").read_text()
    subprocess.run(["bash", "-n", str(tmp_path / "run_train_deepspeed_hosts.sh")], check=True)


def test_the_launcher_accepts_local_rank(tmp_path: Path) -> None:
    """The deepspeed launcher appends --local_rank=N: the converted parser must take it."""
    result = migrate_source(MAIN_CASE.read_text(), "deepspeed")
    parser_code = result.new[result.new.index("parser = argparse"): result.new.index("args = parser.parse_args()")]
    namespace: dict[str, object] = {}
    exec("import argparse\n" + parser_code.replace("\n    ", "\n").strip() + "\nargs = parser.parse_args(['--local_rank=1'])", namespace)
    assert namespace["args"].local_rank == 1  # type: ignore[attr-defined]


def test_an_offloaded_optimizer_deepspeed_has_no_cpu_version_of_keeps_torch_s_class_and_says_so() -> None:
    """SGD with --offload-optimizer cpu: DeepSpeed's guard is switched off for it, in the config
    and in a note; without offloading the config does not touch the guard."""
    source = (Path(__file__).parents[1] / "samples" / "mlp_regression" / "train.py").read_text()
    offloaded = migrate_source(source, "deepspeed", DeepSpeedOptions(offload_optimizer="cpu"), path="train.py")
    config = json.loads(next(a.text for a in offloaded.artifacts if a.path.endswith("ds_config.json")))
    assert config["zero_force_ds_cpu_optimizer"] is False
    assert "torch.optim.SGD(" in offloaded.new
    assert [f.code for f in offloaded.findings if "zero_force_ds_cpu_optimizer" in f.message] == ["MIG004"]
    plain = migrate_source(source, "deepspeed", path="train.py")
    assert "zero_force_ds_cpu_optimizer" not in next(a.text for a in plain.artifacts if a.path.endswith("ds_config.json"))
