"""Golden pairs: tests/cases/<target>/<name>.in.py converts to <name>.out.py exactly.

The expected outputs were read line by line as a reviewer would read the diff; when a change
to the tool alters one, read the new diff the same way before accepting it. Each case is
converted as `train.py`, the name the generated comments mention. A DeepSpeed case also has
`<name>.ds_config.json`, the expected config (stage and offload variants of one script are in
cases/deepspeed/configs, tested by test_deepspeed_config.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migrate import migrate_source

CASES = Path(__file__).parent / "cases"
PAIRS = sorted(CASES.glob("*/*.in.py"))


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name.removesuffix('.in.py')}"


def sibling(source: Path, suffix: str) -> Path:
    return source.with_name(source.name.removesuffix(".in.py") + suffix)


@pytest.mark.parametrize("source", PAIRS, ids=case_id)
def test_converts_to_the_reviewed_output(source: Path) -> None:
    result = migrate_source(source.read_text(), source.parent.name, path="train.py")
    assert result.new == sibling(source, ".out.py").read_text()
    expected_config = sibling(source, ".ds_config.json")
    if expected_config.exists():
        config = next(a.text for a in result.artifacts if a.path.endswith(".json"))
        assert config == expected_config.read_text()
        json.loads(config)


@pytest.mark.parametrize("source", PAIRS, ids=case_id)
def test_second_run_changes_nothing(source: Path) -> None:
    once = migrate_source(source.read_text(), source.parent.name, path="train.py").new
    twice = migrate_source(once, source.parent.name, path="train.py")
    assert twice.new == once
    compile(once, str(source), "exec")


def test_every_target_folder_has_cases() -> None:
    assert {p.parent.name for p in PAIRS} >= {"ddp", "deepspeed"}
