"""mypy, strict on migrate/ as [tool.mypy] in pyproject.toml sets it (issue 26): the code must type-check.

Modules not yet typed are listed in pyproject.toml's overrides ("issue 26: not yet typed"); this test
keeps the rest from regressing. Cold, mypy takes about 20 CPU-seconds; its cache lives in a temporary
folder so that no run leans on an earlier one's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_migrate_type_checks_under_strict_mypy(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy_cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, f"mypy found type errors (config: pyproject.toml [tool.mypy]):\n{run.stdout}{run.stderr}"
    assert "Success" in run.stdout, run.stdout
