"""`migrate verify` finds what a wrong conversion does, and passes a right one.

tests/verify/scripts/train.py is a small original; train_ddp.py is its DDP conversion written by
hand. Each variant below breaks train_ddp.py in one way a real conversion has, and the check made
for that mistake must fail and say where; the others must not. Real processes: torchrun, 2 ranks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts"
HAND_CONVERTED = (SCRIPTS / "train_ddp.py").read_text()

# name -> (what is replaced, by what)
VARIANTS = {
    "forward_on_rank_zero_only": (
        "            if step == 1 and dist.get_rank() == 0:",
        "            if dist.get_rank() == 0:\n                model(x)\n            if step == 1 and dist.get_rank() == 0:",
    ),
    "no_sampler": (
        "sampler=DistributedSampler(dataset, shuffle=True))",
        "shuffle=True)",
    ),
    "print_on_every_rank": (
        "            optimizer.step()\n",
        '            optimizer.step()\n            print(f"step {step} loss {loss.item():.4f}")\n',
    ),
    "model_not_wrapped": ("    model = DDP(model)\n", ""),
    "checkpoint_with_prefix": ("model.module.state_dict()", "model.state_dict()"),
    "raises_on_rank_one": (
        "            optimizer.step()\n",
        '            optimizer.step()\n            if dist.get_rank() == 1:\n                raise RuntimeError("rank one fails")\n',
    ),
}


def variant(name: str) -> str:
    text = HAND_CONVERTED
    old, new = VARIANTS[name]
    assert old in text, name
    text = text.replace(old, new)
    if name == "no_sampler":
        text = text.replace("        loader.sampler.set_epoch(epoch)\n", "")
    if name == "model_not_wrapped":
        text = text.replace("model.module.state_dict()", "model.state_dict()")
    return text


def verify(folder: Path, converted: str | None, *options: str) -> tuple[int, dict]:
    shutil.copy(SCRIPTS / "train.py", folder / "train.py")
    ours, script_args = (options[: options.index("--")], options[options.index("--"):]) if "--" in options else (options, ())
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", *ours]
    if converted is not None:
        (folder / "converted.py").write_text(converted)
        command += ["--converted", str(folder / "converted.py")]
    command += [str(folder / "train.py"), *script_args]
    process = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert process.stdout, process.stderr
    return process.returncode, json.loads(process.stdout)


def statuses(report: dict) -> dict[str, str]:
    return {check["name"]: check["status"] for check in report["checks"]}


def detail(report: dict, name: str) -> str:
    return "\n".join(next(c["detail"] for c in report["checks"] if c["name"] == name))


def test_a_right_conversion_passes_every_check(tmp_path: Path) -> None:
    code, report = verify(tmp_path, HAND_CONVERTED)
    assert code == 0, report
    assert set(statuses(report).values()) == {"passed"}
    assert "1 checkpoint(s) written on rank 0" in detail(report, "checkpoint")


def test_the_tool_s_conversion_of_it_passes(tmp_path: Path) -> None:
    code, report = verify(tmp_path, None)
    assert code == 0, json.dumps(report, indent=1)
    assert statuses(report)["parameters"] == statuses(report)["data"] == "passed"


def test_a_forward_on_rank_zero_only_is_found_hanging_and_located(tmp_path: Path) -> None:
    code, report = verify(tmp_path, variant("forward_on_rank_zero_only"), "--timeout", "15")
    assert code == 1
    assert statuses(report)["hang"] == "failed"
    hang = detail(report, "hang")
    assert "at converted.py:" not in hang  # lines are named by the script
    assert "rank 0 made no progress (no step, no record, no CPU time) for 15 s" in hang
    assert "at train.py:" in hang  # where the ranks wait, in the user's script


def test_identical_samples_on_every_rank_are_found(tmp_path: Path) -> None:
    code, report = verify(tmp_path, variant("no_sampler"))
    assert code == 1
    assert statuses(report)["data"] == "failed"
    assert "identical inputs on every rank" in detail(report, "data")
    assert statuses(report)["parameters"] == "passed"  # DDP still averages: only the data is wrong


def test_a_print_on_every_rank_is_listed(tmp_path: Path) -> None:
    code, report = verify(tmp_path, variant("print_on_every_rank"))
    assert code == 1
    assert statuses(report)["rank_zero"] == "failed"
    assert "rank 1 printed 'step 0 loss" in detail(report, "rank_zero")
    assert 'print(f"step {step} loss {loss.item():.4f}")' in detail(report, "rank_zero")


def test_an_unwrapped_model_diverges(tmp_path: Path) -> None:
    code, report = verify(tmp_path, variant("model_not_wrapped"))
    assert code == 1
    assert statuses(report)["parameters"] == "failed"
    assert "after step 1 the parameters of Regressor differ" in detail(report, "parameters")


def test_a_prefixed_checkpoint_is_found(tmp_path: Path) -> None:
    code, report = verify(tmp_path, variant("checkpoint_with_prefix"))
    assert code == 1
    assert statuses(report)["checkpoint"] == "failed"
    assert "`module.` prefix" in detail(report, "checkpoint")


def test_an_exception_on_one_rank_is_reported_with_its_line(tmp_path: Path) -> None:
    code, report = verify(tmp_path, variant("raises_on_rank_one"))
    assert code == 1
    assert 'rank 1 raised RuntimeError: rank one fails at train.py:' in detail(report, "steps")
    assert 'raise RuntimeError("rank one fails")' in detail(report, "steps")


def test_an_original_that_fails_on_its_own_is_not_blamed_on_the_conversion(tmp_path: Path) -> None:
    code, report = verify(tmp_path, HAND_CONVERTED, "--", "--batch-size", "zero")
    assert code == 2
    assert report["status"] == "error"
    assert "original script" in report["message"]


SAMPLE = Path(__file__).parents[2] / "samples" / "mlp_regression" / "train.py"


@pytest.mark.parametrize("target", [pytest.param("ddp", marks=pytest.mark.full), "deepspeed", "fsdp",
                                    pytest.param("horovod", marks=pytest.mark.full)])
def test_compare_finds_a_sample_trains_like_the_original(tmp_path: Path, target: str) -> None:
    """2 ranks at batch 16 against the original at 32, shuffling off: each step's loss and the weights."""
    shutil.copy(SAMPLE, tmp_path / "train.py")
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", "--compare", "--target", target,
               str(tmp_path / "train.py"), "--", "--epochs", "1"]
    process = subprocess.run(command, capture_output=True, text=True, timeout=400)
    report = json.loads(process.stdout)
    assert process.returncode == 0, json.dumps(report, indent=1)
    assert statuses(report)["compare"] == "passed"
    assert "step 3: loss" in detail(report, "compare")
    if target == "fsdp":  # the weights compared are the shards gathered from both ranks
        assert statuses(report)["parameters"] == "passed" and "gathered" in detail(report, "parameters")


def test_compare_says_why_a_batchnorm_model_differs(tmp_path: Path) -> None:
    code, report = verify(tmp_path, HAND_CONVERTED, "--compare")
    assert code == 1
    assert statuses(report)["compare"] == "failed"
    assert "BatchNorm statistics" in detail(report, "compare")


def test_keep_a_folder_beside_the_script_copies_the_script_once(tmp_path: Path) -> None:
    """`--keep keep` inside the script's folder: the copies do not copy the copies."""
    code, report = verify(tmp_path, HAND_CONVERTED, "--keep", str(tmp_path / "keep"))
    assert code == 0, json.dumps(report, indent=1)
    for copy in ("original", "converted"):
        assert not (tmp_path / "keep" / copy / "keep").exists()
        assert (tmp_path / "keep" / copy / "train.py").is_file()
