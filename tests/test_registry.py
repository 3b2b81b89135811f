"""One registry: the CLI's commands, --help, the README's table, the options each command takes and
the frameworks recognised as "already distributed" all come from migrate.targets."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from migrate import TARGETS, migrate_source
from migrate.targets import REGISTRY, available, command_flags, markdown_table, targets

ROOT = Path(__file__).parents[1]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], capture_output=True, text=True, cwd=ROOT)


def test_the_readme_table_is_the_registrys() -> None:
    readme = (ROOT / "README.md").read_text()
    assert markdown_table() in readme, "README's targets table is out of date; paste migrate.targets.markdown_table()"


def test_every_listed_target_is_a_command_in_help_and_only_those() -> None:
    listing = cli("--help").stdout
    commands = [line.split()[0] for line in listing.split("Commands:")[1].splitlines() if line.startswith("  to-")]
    assert commands == [f"to-{t.name}" for t in REGISTRY if t.available] + [f"to-{t.name}" for t in REGISTRY if not t.available]


def test_the_package_lists_the_available_targets() -> None:
    assert TARGETS == tuple(available())


@pytest.mark.parametrize("name", [t.name for t in REGISTRY if not t.available])
def test_a_planned_target_is_refused_and_names_what_is_available(name: str) -> None:
    result = cli(f"to-{name}", "train.py")
    assert result.returncode == 2
    assert "planned and not available yet; nothing was changed" in result.stderr
    assert all(f"to-{built}" in result.stderr for built in available())


@pytest.mark.parametrize("name", list(available()))
def test_a_commands_defaults_are_the_librarys_defaults(name: str) -> None:
    """Running `migrate to-X file` and `migrate_source(code, "X")` mean the same options, of the
    target's own class (dataclass equality compares the class too)."""
    target = targets()[name]
    assert target.command_options is None or target.command_options() == target.options_class()


@pytest.mark.parametrize("name", list(available()))
def test_the_command_declares_a_flag_for_each_field_of_its_options_class_and_no_other(name: str) -> None:
    """Each field names its flag (`metadata["flag"]`, the words of the checks): the command takes
    exactly those, so no option of the class is out of the user's reach and no flag goes unread."""
    target = targets()[name]
    declared = {flag.split("/")[0] for flag in command_flags(target)}  # `--scale-lr/--no-scale-lr`: --scale-lr
    named = {flag for field in dataclasses.fields(target.options_class) for flag in field.metadata["flag"].split("/")}
    assert declared == named


SCRIPT = """\
import torch
import torch.nn as nn
model = nn.Linear(2, 1)
model = nn.DataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(4, 2)]:
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize("name", list(available()))
def test_a_target_takes_over_data_parallel_or_says_the_script_already_uses_it(name: str) -> None:
    result = migrate_source(SCRIPT, name)
    if "nn.DataParallel" in targets()[name].replaces:
        assert not result.skipped and "nn.DataParallel(" not in result.new
    else:
        assert result.skipped and result.findings[0].message == "already uses nn.DataParallel; left unchanged"


def test_a_script_on_another_framework_is_named_and_left_alone() -> None:
    script = SCRIPT.replace("model = nn.DataParallel(model)\n", "import deepspeed\nmodel, optimizer, _, _ = deepspeed.initialize(model=model)\n")
    assert migrate_source(script, "ddp").findings[0].message == "uses DeepSpeed; left unchanged"
    assert migrate_source(script, "deepspeed").findings[0].message == "already uses DeepSpeed; left unchanged"


def test_the_readme_documents_every_finding_code_with_its_severity() -> None:
    from migrate.findings import all_codes

    readme = (ROOT / "README.md").read_text()
    for code, (severity, _meaning) in all_codes().items():
        assert f"| {code} | {severity.value} |" in readme, code
