"""mypy, strict on migrate/ as [tool.mypy] in pyproject.toml sets it (issue 26): the code must type-check.

Every module is typed: pyproject.toml relaxes nothing for any of them, and this test keeps it so. Cold, mypy takes about 20 CPU-seconds; its cache lives in a temporary
folder so that no run leans on an earlier one's.
"""

from __future__ import annotations

import re
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


IGNORE = re.compile(r"#\s*type:\s*ignore")
IGNORE_WITH_REASON = re.compile(r"#\s*type:\s*ignore\[[a-z-]+(,\s*[a-z-]+)*\]  # \S")


def unexplained_ignores(root: Path) -> list[str]:
    """`path:line` of each `# type: ignore` under `root` without its codes and, after them on the
    same line, `  # why` (`# type: ignore[attr-defined]  # libcst's stub has no ...`)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if IGNORE.search(line) and not IGNORE_WITH_REASON.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}")
    return found


def test_every_type_ignore_in_migrate_says_why() -> None:
    missing = unexplained_ignores(ROOT / "migrate")
    assert not missing, ("a `# type: ignore` needs its error codes and its reason after them on the same line, "
                         "e.g. `# type: ignore[attr-defined]  # libcst's stub has no ...`:\n" + "\n".join(missing))


def test_an_ignore_without_its_reason_is_found(tmp_path: Path) -> None:
    package = tmp_path / "migrate"
    package.mkdir()
    (package / "a.py").write_text(
        "x = f()  # type: ignore[attr-defined]  # f comes from an untyped library\n"
        "y = g()  # type: ignore[attr-defined]\n"
        "z = h()  # type: ignore\n"
        "w = k()  # type: ignore[arg-type, misc]  # k's stub is wrong\n", encoding="utf-8")
    assert unexplained_ignores(package) == ["migrate/a.py:2", "migrate/a.py:3"]
