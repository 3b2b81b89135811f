"""The wheel carries the templates: an installed `migrate` renders launch scripts and configs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_every_template(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the checkout
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--quiet", "-w", str(tmp_path)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("torch_migrate-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"migrate/templates/{p.relative_to(ROOT / 'templates').as_posix()}" for p in (ROOT / "templates").rglob("*.j2")}
    assert templates and templates <= names
    assert "migrate/cli.py" in names and any(n.endswith("entry_points.txt") for n in names)
