"""docs/design.md is the design record: every module of migrate/ has its line in the table, and
the table names no module that is gone. A new module without a line fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "docs" / "design.md"


def test_every_module_has_a_line_and_every_line_a_module() -> None:
    listed = set(re.findall(r"^\| `(migrate/[^`]+\.py)` \| \S", RECORD.read_text(encoding="utf-8"), re.MULTILINE))
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "migrate").rglob("*.py")}
    assert sorted(modules - listed) == [], "modules without a line in docs/design.md"
    assert sorted(listed - modules) == [], "lines in docs/design.md for modules that do not exist"
