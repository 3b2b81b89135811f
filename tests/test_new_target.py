"""Adding a target touches one existing file (issue 26): a target defined here, with its own name,
framework, launcher choice, markers and finding code, is registered with `migrate.targets.register`
(the one line a real target adds to migrate/targets/__init__.py) and then converts, writes its
launcher, re-makes it with `migrate launch`, and is verified, through the same paths as the real
ones: the CLI command built from the registry, migrate.launch, migrate.verify."""

from __future__ import annotations

import dataclasses
import functools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migrate import launchers
from migrate.findings import all_codes
from migrate import DdpOptions
from migrate.records import Severity
from migrate.target_options import ProcessOptions
from migrate.targets import REGISTRY, register, targets
from migrate.targets.base import Conversion, Target
from migrate.targets.ddp import Nproc, torchrun_launcher
from migrate.targets.ddp import conversion as ddp_conversion

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "mlp_regression" / "train.py"

def twin_conversion() -> Conversion:
    """DDP's steps, runtime and wrapper, and its own launcher file (run_<script>_twin.sh)."""
    return dataclasses.replace(ddp_conversion(), artifacts=functools.partial(torchrun_launcher, target="twin"))


@dataclasses.dataclass(frozen=True)
class TwinOptions(ProcessOptions):
    """The target's own options class: one process per GPU, as DDP's steps and launcher read it."""


def twin_options(nproc_per_node: Nproc = "auto") -> TwinOptions:
    """The target's own option (`--nproc-per-node`), declared as every real target declares its own."""
    return TwinOptions(nproc_per_node=nproc_per_node)


TWIN = Target(
    name="twin",
    framework="Twin (DistributedDataParallel under another name)",
    summary="DDP under another name, launched by torchrun.",
    description="A target made in a test: DDP's conversion, its own name and code.",
    example="migrate to-twin train.py",
    conversion=twin_conversion,
    command_options=twin_options,
    options_class=TwinOptions,
    markers={"twin.init": "Twin"},
    launcher=launchers.TORCHRUN,
    signs=("DistributedDataParallel",),
    codes={"MIG991": (Severity.NOTE, "Twin: a code only this target reports")},
)


@pytest.fixture()
def twin(monkeypatch: pytest.MonkeyPatch) -> Iterator[Target]:
    """TWIN registered for one test (the registry and the declared codes restored after)."""
    monkeypatch.setattr("migrate.targets.REGISTRY", list(REGISTRY))
    from migrate import findings

    monkeypatch.setattr(findings, "_DECLARED", dict(findings._DECLARED))
    register(TWIN)
    yield TWIN


@pytest.fixture()
def cli(twin: Target) -> Iterator[CliRunner]:
    """The CLI with `to-twin` built from the registry, as every real target's command is."""
    from migrate import cli as cli_module

    commands = list(cli_module.app.registered_commands)
    cli_module._convert_command(twin)
    yield CliRunner()
    cli_module.app.registered_commands[:] = commands


def invoke(runner: CliRunner, *args: str) -> tuple[int, str]:
    from migrate.cli import app

    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_a_registered_target_is_known_everywhere_the_registry_is_read(twin: Target) -> None:
    from migrate.launch_command import launchable

    assert targets()["twin"] is twin
    assert all_codes()["MIG991"] == (Severity.NOTE, "Twin: a code only this target reports")
    assert launchable()["twin"] is launchers.TORCHRUN


def test_it_converts_and_writes_its_own_launcher(cli: CliRunner, tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path / "train.py")
    status, output = invoke(cli, "to-twin", "--write", "--nproc-per-node", "2", str(tmp_path / "train.py"))
    assert status == 0, output
    assert "DistributedDataParallel" in (tmp_path / "train.py").read_text()
    launcher = (tmp_path / "run_train_twin.sh").read_text()
    assert "torchrun" in launcher and "migrate launch twin train.py --nproc-per-node 2" in launcher


def test_migrate_launch_renders_it_for_several_nodes_and_slurm(cli: CliRunner, tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path / "train.py")
    status, output = invoke(cli, "launch", "twin", str(tmp_path / "train.py"), "--nnodes", "2",
                            "--master-addr", "10.0.0.1", "--out", "-")
    assert status == 0, output
    assert "--nnodes=2" in output or "--nnodes 2" in output
    status, output = invoke(cli, "launch", "twin", str(tmp_path / "train.py"), "--scheduler", "slurm",
                            "--nproc-per-node", "2", "--out", "-")
    assert status == 0, output
    assert "#SBATCH" in output
    status, listed = invoke(cli, "launch", "--list")
    assert "twin --scheduler kubernetes" in listed


def test_the_library_refuses_its_options_in_the_words_of_the_cli(twin: Target) -> None:
    from migrate import migrate_source
    from migrate.options import OptionsError

    with pytest.raises(OptionsError, match="^options: to-twin takes tests.test_new_target.TwinOptions, not DdpOptions$"):
        migrate_source(SAMPLE.read_text(), "twin", DdpOptions())
    with pytest.raises(OptionsError, match="^--nproc-per-node: '0': give a number from 1 to 4096"):
        migrate_source(SAMPLE.read_text(), "twin", TwinOptions(nproc_per_node="0"))


@pytest.mark.slow
@pytest.mark.full
def test_migrate_verify_runs_it_under_its_launcher(cli: CliRunner, tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path / "train.py")
    status, output = invoke(cli, "verify", "--target", "twin", "--steps", "2", str(tmp_path / "train.py"))
    assert status == 0, output
    assert "passed" in output
