"""Pointing the tool at a folder: it converts the user's scripts, not their virtual environment,
their ignored files or a folder that happens to end in `.py`, and says so when there is nothing
to convert. And the diff it prints is byte for byte what `--write` writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "cases" / "main_function" / "input.py"


def migrate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def place(folder: Path, relative: str, text: str | None = None) -> Path:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        shutil.copy(SCRIPT, path)
    else:
        path.write_text(text)
    return path


def listed(stdout: str) -> list[str]:
    return sorted(stdout.split())


def test_outside_git_virtualenvs_and_build_folders_are_skipped(tmp_path: Path) -> None:
    place(tmp_path, "src/train.py")
    place(tmp_path, "env/pyvenv.cfg", "home = /usr/bin\n")
    place(tmp_path, "env/lib/python3.11/site-packages/pkg/train.py")
    for skipped in ("node_modules/x/train.py", "build/lib/train.py", ".tox/py311/train.py", "lib/site-packages/t.py"):
        place(tmp_path, skipped)
    result = migrate("to-ddp", "--check", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert listed(result.stdout) == ["src/train.py"]


def test_inside_git_ignored_files_are_skipped_and_untracked_ones_taken(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    place(tmp_path, ".gitignore", "scratch/\n")
    place(tmp_path, "tracked.py")
    place(tmp_path, "untracked.py")
    place(tmp_path, "scratch/ignored.py")
    subprocess.run(["git", "add", "tracked.py", ".gitignore"], cwd=tmp_path, check=True)
    result = migrate("to-ddp", "--check", ".", cwd=tmp_path)
    assert listed(result.stdout) == ["tracked.py", "untracked.py"]
    named = migrate("to-ddp", "--check", "scratch", cwd=tmp_path)  # an ignored folder named on purpose
    assert listed(named.stdout) == ["scratch/ignored.py"]


def test_exclude_globs_and_a_folder_named_like_a_script(tmp_path: Path) -> None:
    place(tmp_path, "train.py")
    place(tmp_path, "old/train.py")
    place(tmp_path, "train_v1.py")
    (tmp_path / "models.py").mkdir()
    place(tmp_path, "models.py/inner.py")
    result = migrate("to-ddp", "--check", "--exclude", "old", "--exclude", "*_v1.py", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert listed(result.stdout) == ["models.py/inner.py", "train.py"]


def test_files_that_do_not_train_are_a_count_not_a_line_each(tmp_path: Path) -> None:
    place(tmp_path, "train.py")
    for name in ("utils.py", "data.py", "model.py"):
        place(tmp_path, name, "import torch\n\ndef helper(x):\n    return x\n")
    result = migrate("to-ddp", ".", cwd=tmp_path)
    assert result.returncode == 0
    assert ": note: MIG002" not in result.stderr
    assert "migrate: 4 Python files: 1 to convert, 3 not training scripts (MIG002, not listed)" in result.stderr
    named = migrate("to-ddp", "utils.py", cwd=tmp_path)
    assert "utils.py:1:1: note: MIG002" in named.stderr  # a file named on the command line still gets its line


def test_a_folder_without_python_files_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    place(tmp_path, "docs/readme.md", "# notes\n")
    for folder in ("empty", "docs"):
        result = migrate("to-ddp", folder, cwd=tmp_path)
        assert result.returncode == 2
        assert f"migrate: {folder}: no Python files found in this folder" in result.stderr


def test_a_fifo_in_a_searched_folder_is_skipped(tmp_path: Path) -> None:
    import os

    place(tmp_path, "train.py")
    os.mkfifo(tmp_path / "pipe.py")
    result = migrate("to-ddp", "--check", ".", cwd=tmp_path)
    assert listed(result.stdout) == ["train.py"]


def test_the_same_file_named_twice_is_converted_once(tmp_path: Path) -> None:
    place(tmp_path, "train.py")
    (tmp_path / "link.py").symlink_to(tmp_path / "train.py")
    result = migrate("to-ddp", "train.py", "./train.py", "link.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("diff --git a/train.py b/train.py") == 1
    assert "link.py" not in result.stdout


def variants() -> dict[str, bytes]:
    text = SCRIPT.read_text()
    return {
        "latin.py": text.replace("import argparse", "# -*- coding: latin-1 -*-\n# caf\xe9\nimport argparse", 1).encode("latin-1"),
        "bom.py": b"\xef\xbb\xbf" + text.encode(),
        "cr_only.py": text.replace("\n", "\r").encode(),
        "crlf.py": text.replace("\n", "\r\n").encode(),
        "form_feed.py": text.replace("import argparse", "import argparse\n\x0c\n# a\u2028b", 1).encode(),
    }


@pytest.mark.parametrize("name", sorted(variants()))
def test_the_printed_diff_applies_to_exactly_what_write_writes(tmp_path: Path, name: str) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / name).write_bytes(variants()[name])
    diff = subprocess.run([sys.executable, "-m", "migrate", "to-ddp", name, f"./{name}"], cwd=tmp_path,
                          capture_output=True, timeout=120)
    assert diff.returncode == 0, diff.stderr
    (tmp_path / "p.patch").write_bytes(diff.stdout)
    subprocess.run(["git", "apply", "p.patch"], cwd=tmp_path, check=True)
    applied = (tmp_path / name).read_bytes()
    (tmp_path / name).write_bytes(variants()[name])
    for launcher in tmp_path.glob("run_*.sh"):
        launcher.unlink()
    written = migrate("to-ddp", "--write", name, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert (tmp_path / name).read_bytes() == applied
    assert applied != variants()[name]


def test_a_diff_of_files_outside_the_current_folder_applies_where_it_says(tmp_path: Path) -> None:
    place(tmp_path, "project/train.py")
    (tmp_path / "elsewhere").mkdir()
    result = migrate("to-ddp", "../project/train.py", cwd=tmp_path / "elsewhere")
    assert result.returncode == 0, result.stderr
    assert f"relative to {tmp_path / 'project'}" in result.stderr
    (tmp_path / "p.patch").write_text(result.stdout)
    subprocess.run(["git", "apply", str(tmp_path / "p.patch")], cwd=tmp_path / "project", check=True)
    assert "dist.init_process_group(" in (tmp_path / "project" / "train.py").read_text()
