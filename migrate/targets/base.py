"""What a target is. Everything that differs between DDP, DeepSpeed, DataParallel (and, later,
FSDP and Horovod) is declared by the target, so a new target is one file plus its registry line:

- its command: name, help, example, its own command-line options and the options class they
  make (migrate.target_options; checked by migrate.options, for the CLI and the API alike);
- the frameworks it recognises in a script and what it does about one it finds (`already`);
- its conversion, imported on first use so the CLI starts without libcst: the runtime that spells
  rank, world size and setup (migrate.runtime), the model wrapper, the ordered steps, the files it
  renders beside the script;
- what a run over several scripts settles together (DeepSpeed: one config per folder);
- its launcher (migrate.launchers: what `migrate launch` writes and `migrate verify` runs), what a
  converted script shows of it (`signs`), and the conversion verify checks;
- the finding codes only it reports (migrate.findings holds the shared ones).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from migrate.records import Artifact, FileResult, InputError, Severity
from migrate.target_options import Options

if TYPE_CHECKING:
    from migrate.launchers import Launcher
    from migrate.options import OptionProblem
    from migrate.runtime import Runtime
    from migrate.steps.base import Context, Step, Wrapper

# one script converted again (path, target, options): what migrate.api.migrate_file does, handed in
Convert = Callable[[str, str, Options], FileResult | InputError]
# several scripts converted together: results in (with the converter), results out, errors and
# notes (path, message) on the side
Settle = Callable[[list[FileResult], Options, Convert], tuple[list[FileResult], list[InputError], list[tuple[str, str]]]]


@dataclass(frozen=True)
class Conversion:
    """What converting a script to the target does (built on first use: it imports libcst)."""

    steps: tuple[Step, ...]
    artifacts: Callable[[str, Context], list[Artifact]]  # the files beside the script: launcher, config
    runtime: Runtime | None  # None: one process (nn.DataParallel), nothing to set up
    wrapper: Wrapper | None


@dataclass(frozen=True)
class Target:
    name: str  # the CLI's `to-<name>`
    framework: str  # as people call it, for messages
    summary: str  # one line: `migrate --help` and the README's table of targets
    description: str  # the command's --help, after the summary
    example: str  # one command line, shown under the help
    conversion: Callable[[], Conversion]
    # the command's own options: a function whose typer-annotated parameters are the options and
    # which returns the options_class they mean (raising typer.BadParameter for a combination it refuses)
    command_options: Callable[..., Options] | None = None
    options_class: type[Options] = Options  # the options it takes (migrate.target_options); any other is refused
    check_options: Callable[[Options], list[OptionProblem]] | None = None
    markers: Mapping[str, str] = field(default_factory=dict)  # qualified call -> framework, as `framework` says it
    replaces: frozenset[str] = frozenset()  # frameworks found in a script that the conversion takes over
    launcher: Launcher | None = None  # what runs the converted script (migrate.launchers); None: python
    signs: tuple[str, ...] = ()  # what a converted script calls: a script with none is not converted yet
    # the conversion `migrate verify` checks, from its --zero and --compare (None: the defaults)
    verify_options: Callable[[int, bool], Options] | None = None
    pretend_gpu_refusal: str | None = None  # why `verify --pretend-gpu` cannot run this target (None: it can)
    settle: Settle | None = None
    codes: Mapping[str, tuple[Severity, str]] = field(default_factory=dict)  # finding codes only this target reports
    available: bool = True
    # a script on one of these frameworks (and no other) is moved to this target by `swap`, a
    # conversion that keeps what the script has in common with the target (FSDP: from DDP)
    swaps: frozenset[str] = frozenset()
    swap: Callable[[], Conversion] | None = None

    def swapped(self, frameworks: list[str]) -> bool:
        """Whether `swap` converts a script that calls these frameworks."""
        kept = [f for f in frameworks if f not in self.replaces]
        return self.swap is not None and bool(kept) and set(kept) <= self.swaps and any(
            f in self.swaps - {"torch.distributed"} for f in kept)

    def already(self, frameworks: list[str]) -> str | None:
        """Why a script that calls these frameworks is left unchanged, or None to convert it."""
        kept = [f for f in frameworks if f not in self.replaces]
        if not kept:
            return None
        owned = {f for f in kept if f in self.markers.values() or f == self.framework}
        # the most telling name: a framework rather than the bare process group every one of them
        # starts with, the target's own before another
        framework = min(kept, key=lambda f: (f == "torch.distributed", f not in owned))
        own = framework in owned
        return f"{'already uses' if own else 'uses'} {framework}; left unchanged"


def planned(name: str, framework: str, markers: Mapping[str, str]) -> Target:
    """A target that is listed, recognised in scripts and refused: users see what is coming."""

    def not_yet() -> Conversion:
        raise NotImplementedError(f"to-{name} is planned")

    return Target(name=name, framework=framework, summary=f"{framework}: planned, not available yet.",
                  description="", example="", conversion=not_yet, markers=markers, available=False)
