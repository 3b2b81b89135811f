"""Golden cases: tests/cases/<case>/input.py converts, for each target that has a `<target>.py`
beside it, to exactly that file, with exactly the findings in `<target>.findings` and, where the
target writes one, the config in `<target>.ds_config.json` (layout: tests/cases/README.md).

The expected files were read as a reviewer reads a diff; when a change to the tool alters one,
`scripts/golden` rewrites them and `git diff tests/cases` is read the same way before accepting
it. Each case is converted as `train.py`, the name the generated comments mention. The targets
are the registry's (migrate.targets), so a new target needs no change here, only its files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from migrate import migrate_source
from migrate.project_files import read_from_disk
from migrate.records import Finding
from migrate.targets import targets

CASES = Path(__file__).parent / "cases"
TARGETS = tuple(targets())
CASE_DIRS = sorted(p.parent for p in CASES.glob("*/input.py"))
PAIRS = [(case, target) for case in CASE_DIRS for target in TARGETS if (case / f"{target}.py").exists()]
# Every folder of CASES must be a case, except those named _like_this (the DeepSpeed option variants).
FOLDERS = sorted(p for p in CASES.iterdir() if p.is_dir() and not p.name.startswith("_"))
PAIR_IDS = [f"{case.name}/{target}" for case, target in PAIRS]
# What may sit in a case folder; anything else (a typo such as `dpp.py`) fails a test.
SUFFIXES = (".py", ".findings", ".ds_config.json", ".README.md")
ALLOWED = {"input.py", "README.md"} | {target + suffix for target in TARGETS for suffix in SUFFIXES}


def findings_text(findings: Sequence[Finding]) -> str:
    """One line per finding, `line:col MIGnnn`, in the order the tool reports them."""
    return "".join(f"{f.line}:{f.col} {f.code}\n" for f in findings)


def expected_files(case: Path, target: str) -> dict[str, str]:
    """The files the current tool makes for one case and target, by name: what `scripts/golden`
    writes and what the tests below compare with the files on disk."""
    # named train.py, in the case folder: a module the script imports is read from there
    result = migrate_source((case / "input.py").read_text(), target, path=str(case / "train.py"), read_module=read_from_disk)
    files = {f"{target}.py": result.new, f"{target}.findings": findings_text(result.findings)}
    config = next((a.text for a in result.artifacts if a.path.endswith("ds_config.json")), None)
    if config is not None:
        files[f"{target}.ds_config.json"] = config
    return files


@pytest.mark.parametrize(("case", "target"), PAIRS, ids=PAIR_IDS)
def test_converts_to_the_reviewed_output(case: Path, target: str) -> None:
    made = expected_files(case, target)
    for name, text in made.items():
        assert (case / name).exists(), f"no {case.name}/{name}: run scripts/golden {case.name}, then review the diff"
        assert text == (case / name).read_text(), f"{case.name}/{name}"
    config = case / f"{target}.ds_config.json"
    assert config.exists() == (config.name in made), f"{case.name}/{config.name} pinned, but no config is written"
    if config.exists():
        json.loads(config.read_text())


@pytest.mark.parametrize(("case", "target"), PAIRS, ids=PAIR_IDS)
def test_second_run_changes_nothing(case: Path, target: str) -> None:
    once = (case / f"{target}.py").read_text()
    twice = migrate_source(once, target, path="train.py")
    assert twice.new == once
    compile(once, str(case / f"{target}.py"), "exec")


def imported_modules(case: Path) -> set[str]:
    """`nets.py` for `from nets import Decoder` in input.py: a module of the script's own folder,
    which to-fsdp reads for the model's blocks."""
    text = (case / "input.py").read_text() if (case / "input.py").exists() else ""
    return {f"{name}.py" for name in re.findall(r"^(?:from|import)\s+(\w+)", text, re.MULTILINE)}


@pytest.mark.parametrize("case", FOLDERS, ids=lambda case: case.name)
def test_a_case_holds_only_files_the_tests_read(case: Path) -> None:
    names = {p.name for p in case.iterdir()}
    unknown = sorted(names - ALLOWED - imported_modules(case))
    assert not unknown, f"{case.name}: {unknown} is not input.py, README.md or <target>{{{', '.join(SUFFIXES)}}} of a target in {TARGETS}"
    assert "input.py" in names, f"{case.name} has no input.py"
    outputs = {target for target in TARGETS if f"{target}.py" in names}
    assert outputs, f"{case.name} has no expected output: scripts/golden --add TARGET {case.name}"
    for target in TARGETS:
        if target in outputs:
            assert f"{target}.findings" in names, f"{case.name}: {target}.py without {target}.findings"
        else:
            extra = sorted(name for name in names if name.startswith(f"{target}."))
            assert not extra, f"{case.name}: {extra} without {target}.py"

