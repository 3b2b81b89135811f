"""Where setup lands, seen from the user's side: `python train.py --help` starts no process group,
`main(parser.parse_args())` still gets setup before its model is wrapped, and a class of the
converted script works where other code imports it (it reads no global that only setup binds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrate import migrate_source

pytestmark = pytest.mark.slow  # starts real training processes

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "tests" / "cases" / "trainer_parsed_in_call" / "input.py"


# The same script with the command line parsed in the __main__ block itself: setup goes there.
PARSED_IN_MAIN_BLOCK = CASE.read_text().replace(
    "    main(parser.parse_args())", "    args = parser.parse_args()\n    torch.manual_seed(0)\n    Trainer(args).fit(args.epochs)")


def converted(tmp_path: Path, source: str | None = None) -> Path:
    result = migrate_source(source or CASE.read_text(), "ddp", path="train.py")
    assert not result.skipped
    script = tmp_path / "train.py"
    script.write_text(result.new)
    return script


def plain_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    return env


def test_help_starts_no_process_group(tmp_path: Path) -> None:
    script = converted(tmp_path)
    # a world of two whose other rank never comes: a process group started here would wait for it
    env = {**plain_env(), "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "9"}
    result = subprocess.run([sys.executable, str(script), "--help"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--batch-size" in result.stdout


def test_setup_runs_before_the_model_is_wrapped_when_main_gets_the_parsed_args(tmp_path: Path) -> None:
    script = converted(tmp_path)
    result = subprocess.run([sys.executable, str(script), "--epochs", "1"], env=plain_env(), capture_output=True,
                            text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "epoch 0 loss" in result.stdout


@pytest.mark.parametrize("source", [None, PARSED_IN_MAIN_BLOCK], ids=["setup-in-main", "setup-in-main-block"])
def test_a_class_of_the_converted_script_works_where_other_code_imports_it(tmp_path: Path, source: str | None) -> None:
    text = converted(tmp_path, source).read_text()
    assert "parse_args()" in text and "local_rank" not in text.split("def main")[0]
    caller = tmp_path / "caller.py"
    caller.write_text(
        "import argparse\nimport torch.distributed as dist\nfrom train import Trainer\n\n"
        'dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)\n'
        "Trainer(argparse.Namespace(lr=0.05, batch_size=16)).fit(1)\n"
        "dist.destroy_process_group()\n"
    )
    result = subprocess.run([sys.executable, str(caller)], env=plain_env(), capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "epoch 0 loss" in result.stdout
