"""Options are checked in one place: the library refuses what the command line refuses, in the
same words, and another target's options class is refused instead of its fields being ignored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from migrate import DdpOptions, DeepSpeedOptions, Options, migrate_paths, migrate_source
from migrate.options import OptionsError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "cases" / "main_function" / "input.py"

REFUSED = [
    ("deepspeed", DeepSpeedOptions(zero=1, offload_param="cpu"), ["--zero", "1", "--offload-param", "cpu"],
     "--offload-param: offloading weights needs ZeRO stage 3 (got --zero 1)"),
    ("deepspeed", DeepSpeedOptions(zero=0, offload_optimizer="cpu"), ["--zero", "0", "--offload-optimizer", "cpu"],
     "--offload-optimizer: offloading optimizer state needs ZeRO stage 1, 2 or 3"),
    ("deepspeed", DeepSpeedOptions(offload_param="disk", zero=3), ["--zero", "3", "--offload-param", "disk"],
     "--offload-param: 'disk': choose none, cpu or nvme"),
    ("deepspeed", DeepSpeedOptions(hosts=("node1:99999",)), ["--hosts", "node1:99999"],
     "--hosts: 'node1:99999': write HOST or HOST:GPUS"),
    ("ddp", DdpOptions(nproc_per_node="0"), ["--nproc-per-node", "0"],
     "--nproc-per-node: '0': give a number from 1 to 4096, 'gpu' or 'auto'"),
    ("ddp", DdpOptions(keep_global_batch=True, scale_lr=True), ["--keep-global-batch", "--scale-lr"],
     "--keep-global-batch/--scale-lr: --scale-lr raises the learning rate"),
]


@pytest.mark.parametrize("target, options, flags, message", REFUSED, ids=[m.split(":")[0] for *_, m in REFUSED])
def test_the_library_refuses_what_the_command_line_refuses_in_the_same_words(
    tmp_path: Path, target: str, options: Options, flags: list[str], message: str
) -> None:
    with pytest.raises(OptionsError) as refused:
        migrate_source(SCRIPT.read_text(), target, options)
    assert str(refused.value).startswith(message)
    (tmp_path / "train.py").write_text(SCRIPT.read_text())
    cli = subprocess.run([sys.executable, "-m", "migrate", f"to-{target}", *flags, "train.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2
    flag, _, words = message.partition(": ")
    assert f"Invalid value for {flag}: {words}" in " ".join(cli.stderr.split())


@pytest.mark.parametrize("target, options, message", [
    ("ddp", DeepSpeedOptions(zero=3), "to-ddp takes migrate.DdpOptions, not DeepSpeedOptions"),
    ("deepspeed", DdpOptions(keep_global_batch=True), "to-deepspeed takes migrate.DeepSpeedOptions, not DdpOptions"),
    # to-dp's class is every other's base: a subclass would carry options to-dp ignores
    ("dp", DdpOptions(sync_batchnorm=True), "to-dp takes migrate.Options, not DdpOptions"),
])
def test_another_targets_options_class_is_refused_naming_the_one_to_use(target: str, options: Options, message: str) -> None:
    with pytest.raises(OptionsError) as refused:
        migrate_source(SCRIPT.read_text(), target, options)
    assert str(refused.value) == f"options: {message}"


def test_a_bad_precision_is_refused_for_deepspeed() -> None:
    with pytest.raises(OptionsError, match="'fp17': choose auto, fp32, fp16 or bf16"):
        migrate_source(SCRIPT.read_text(), "deepspeed", DeepSpeedOptions(precision="fp17"))


def test_bad_options_stop_a_whole_run_rather_than_failing_each_file(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT.read_text())
    with pytest.raises(OptionsError):
        list(migrate_paths([str(tmp_path / "train.py")], "ddp", DeepSpeedOptions(zero=3)))
