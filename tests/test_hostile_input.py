"""Input a user never meant to be hostile: odd file names, FIFOs, deep nesting, huge literals,
whole repositories. Each is refused with `migrate: path: message` and exit 2, or converted; never
a traceback, a hang, or code built from a file name."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from migrate import api
from migrate.records import FileResult, InputError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "cases" / "main_function" / "input.py"


def migrate(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def fake_launcher(folder: Path, name: str) -> dict[str, str]:
    """A `torchrun`/`deepspeed` on PATH that prints the script path it was given."""
    bin_folder = folder / "fake-bin"
    bin_folder.mkdir(exist_ok=True)
    launcher = bin_folder / name
    launcher.write_text('#!/usr/bin/env bash\nfor a in "$@"; do last="$a"; case "$a" in *.py) script="$a";; esac; done\n'
                        'printf "%s" "$script"\n')
    launcher.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("name", ["my train.py", "it's \"train\".py", "$(touch pwned).py", "`touch pwned`.py", "a;b&c.py"])
@pytest.mark.parametrize("command, launcher", [("to-ddp", "torchrun"), ("to-deepspeed", "deepspeed")])
def test_names_with_quotes_dollars_and_backticks_stay_names(tmp_path: Path, name: str, command: str, launcher: str) -> None:
    shutil.copy(SCRIPT, tmp_path / name)
    result = migrate(command, "--write", name, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    stem = name[:-3]
    target = "ddp" if command == "to-ddp" else "deepspeed"
    compile((tmp_path / name).read_text(), name, "exec")
    run = subprocess.run([str(tmp_path / f"run_{stem}_{target}.sh")], cwd=tmp_path, capture_output=True, text=True,
                         env=fake_launcher(tmp_path, launcher), timeout=60)
    assert run.returncode == 0, run.stderr
    assert Path(run.stdout).name == name
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("name", ["evil\ntouch pwned\n.py", "cr\rname.py", "tab\tname.py", "line\u2028sep.py"])
def test_names_with_control_characters_are_refused(tmp_path: Path, name: str) -> None:
    shutil.copy(SCRIPT, tmp_path / name)
    result = migrate("to-ddp", "--write", name, cwd=tmp_path)
    assert result.returncode == 2
    assert "the file name holds the control character" in result.stderr or "separator" in result.stderr
    assert (tmp_path / name).read_bytes() == SCRIPT.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_a_name_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xe9.py")
    shutil.copy(SCRIPT, tmp_path / name)
    result = subprocess.run([sys.executable, "-m", "migrate", "to-ddp", os.fsencode(name)], cwd=tmp_path,
                            capture_output=True, timeout=120)
    assert result.returncode == 2
    assert b"the file name is not valid UTF-8" in result.stderr and b"Traceback" not in result.stderr


def test_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    result = migrate("to-ddp", "pipe.py", "/dev/zero", cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    assert "migrate: pipe.py: is a FIFO (named pipe), not a regular file" in result.stderr
    assert "migrate: /dev/zero: is a device, not a regular file" in result.stderr


def test_a_huge_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_bytes(b"x = 1\n" * (3 * 1024 * 1024))
    result = migrate("to-ddp", "big.py", cwd=tmp_path)
    assert result.returncode == 2 and "is larger than 16 MiB" in result.stderr


def training(body: str) -> str:
    """A small complete training script with `body` in its loop."""
    return (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, TensorDataset\n\n\n"
        "def main():\n    model = nn.Linear(4, 1)\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, shuffle=True)\n"
        "    for epoch in range(2):\n        for (x,) in loader:\n            loss = model(x).pow(2).mean()\n"
        f"{body}"
        "            optimizer.zero_grad()\n            loss.backward()\n            optimizer.step()\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )


@pytest.mark.parametrize("body", [
    "            total = " + " + ".join(["x.sum()"] * 600) + "\n",
    "            k = 0\n            if k == 0:\n                pass\n"
    + "".join(f"            elif k == {i}:\n                pass\n" for i in range(1, 800)),
    f"            big = {'9' * 4300}\n",  # the most digits Python itself reads
])
def test_deeply_nested_or_huge_but_valid_code_converts(tmp_path: Path, body: str) -> None:
    (tmp_path / "train.py").write_text(training(body))
    result = migrate("to-ddp", "--write", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dist.init_process_group(" in (tmp_path / "train.py").read_text()


def test_an_internal_error_names_the_file_and_the_others_still_convert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.py").write_text(training(""))
    (tmp_path / "b.py").write_text(training(""))
    real = api.migrate_source

    def broken_on_a(code: str, target: str, options: object = None, path: str = "", read_module: object = None) -> FileResult:
        if path.endswith("a.py"):
            raise KeyError("a bug")
        return real(code, target, options, path, read_module)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "migrate_source", broken_on_a)
    outcomes = list(api.migrate_paths([str(tmp_path / "a.py"), str(tmp_path / "b.py")], "ddp"))
    assert isinstance(outcomes[0], InputError)
    assert str(outcomes[0]).endswith("a.py: internal error: KeyError: 'a bug'; file left untouched (please report it with the file)")
    assert isinstance(outcomes[1], FileResult) and outcomes[1].changed


def test_write_and_check_together_are_refused(tmp_path: Path) -> None:
    shutil.copy(SCRIPT, tmp_path / "train.py")
    result = migrate("to-ddp", "--write", "--check", "train.py", cwd=tmp_path)
    assert result.returncode == 2 and "--write and --check exclude each other" in result.stderr
    assert (tmp_path / "train.py").read_bytes() == SCRIPT.read_bytes()


def test_json_report_keeps_stderr_one_json_document(tmp_path: Path) -> None:
    shutil.copy(SCRIPT, tmp_path / "train.py")
    result = migrate("to-ddp", "--report", "json", "train.py", "missing.py", cwd=tmp_path)
    assert result.returncode == 2
    entries = json.loads(result.stderr)
    assert {"path": "missing.py", "line": 0, "col": 0, "code": "MIG900", "severity": "error",
            "message": "no such file"} in entries


def test_a_full_or_closed_stdout_is_an_error(tmp_path: Path) -> None:
    shutil.copy(SCRIPT, tmp_path / "train.py")
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "migrate", "to-ddp", "train.py"], cwd=tmp_path, stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 2
    # the sample's one note (MIG007, its epoch loss reduced over the ranks), then the error
    assert result.stderr.splitlines()[-1] == "migrate: <stdout>: cannot write the output: No space left on device"
    assert "Traceback" not in result.stderr


def test_config_out_outside_the_bmp_names_the_same_file_in_script_and_disk(tmp_path: Path) -> None:
    shutil.copy(SCRIPT, tmp_path / "train.py")
    name = "ds_\U0001f680.json"
    result = migrate("to-deepspeed", "--write", "--config-out", name, "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / name).is_file()
    assert f'"{name}"' in (tmp_path / "train.py").read_text()


@pytest.mark.parametrize("value", ["99999999999999999999999", "-3", "0", "1e3"])
def test_absurd_process_counts_are_refused(tmp_path: Path, value: str) -> None:
    shutil.copy(SCRIPT, tmp_path / "train.py")
    result = migrate("to-ddp", "--nproc-per-node", value, "train.py", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.parametrize("loader_batch, clip, expected", [
    ("batch_size=-1", "", "train_micro_batch_size_per_gpu would be -1"),
    (f"batch_size={'9' * 4300}", "", "train_micro_batch_size_per_gpu would be a 4300-digit number"),
    ("batch_size=8", "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e999)\n", "gradient_clipping would be inf"),
])
def test_config_values_no_config_can_hold_are_refused(tmp_path: Path, loader_batch: str, clip: str, expected: str) -> None:
    source = training("").replace("batch_size=8", loader_batch).replace("            optimizer.step()\n",
                                                                           clip + "            optimizer.step()\n")
    (tmp_path / "train.py").write_text(source)
    result = migrate("to-deepspeed", "--write", "train.py", cwd=tmp_path)
    assert result.returncode == 0
    assert "MIG125" in result.stderr and expected in result.stderr
    assert (tmp_path / "train.py").read_text() == source and not (tmp_path / "ds_config.json").exists()


def test_read_only_mode_bits_are_refused(tmp_path: Path) -> None:
    shutil.copy(SCRIPT, tmp_path / "train.py")
    (tmp_path / "train.py").chmod(stat.S_IRUSR)
    result = migrate("to-ddp", "--write", "train.py", cwd=tmp_path)
    assert result.returncode == 2 and "migrate: train.py: is read-only" in result.stderr
