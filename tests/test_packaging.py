"""The wheel carries the templates: an installed `migrate` renders launch scripts and configs."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_every_template(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--quiet", "-w", str(tmp_path)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("torch_migrate-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"migrate/templates/{p.relative_to(ROOT / 'templates').as_posix()}" for p in (ROOT / "templates").rglob("*.j2")}
    assert templates and templates <= names
    assert "migrate/cli.py" in names and any(n.endswith("entry_points.txt") for n in names)
