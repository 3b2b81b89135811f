"""The `migrate` command line: one command per target, sharing one contract.

By default a command prints a unified diff (the converted scripts plus the files it would
create) and writes nothing; `--write` applies it, all files or none; `--check` only says which
files would change, and what `--write` would refuse.
Findings go to stderr as `path:line:col: severity: MIGnnn message`; one that says what the target
itself is (MIG006, the same for every script) is printed once a run, at the first file that drew
it (JSON keeps every file's entry). `--report sarif` and `github-review` are one JSON document each,
`--report markdown` a pull-request description (migrate.review; `--verify-report` adds a verify
JSON's result), and `--report-out PATH` writes any report to a file, atomically, instead of stderr.
`-j N` converts the files in N processes (default: the cores), printing exactly what `-j 1`
prints; on a terminal only, a progress line on stderr and a coloured diff (neither with NO_COLOR;
no progress with --quiet); a folder run's text report ends with a summary table, unless --quiet.
The exit status is a sum of
flags, so a run with both says both: 1 `--check` found files to convert, 2 an error (bad input or
options, a file that could not be converted, an internal error); 0 neither, 3 both.
The commands come from the registry (migrate.targets). This module imports no libcst: the API
does, when a command actually runs.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import shlex
import signal
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, AbstractSet, Annotated, Optional

import typer
from typer.core import TyperCommand

from migrate.advise_command import advise
from migrate.check_command import check
from migrate.doctor_command import doctor
from migrate.launch_command import launch
from migrate.records import FileResult, InputError
from migrate.target_options import Options
from migrate.targets import REGISTRY, available, targets
from migrate.targets.base import Target
from migrate.targets.deepspeed import Zero

if TYPE_CHECKING:  # verify imports torch-free but heavier modules: only when it runs
    from typer._click.core import Context as ClickContext  # the click typer vendors (0.29)

    from migrate.verify.checks import VerifyResult

# exit status flags (Fixit's convention): a run that found both reports both
EXIT_OK, EXIT_WOULD_CHANGE, EXIT_BAD_INPUT = 0, 1, 2
# findings that say what the target itself is, the same for every script (migrate.findings): once a run
ADVISORY = frozenset({"MIG006"})

app = typer.Typer(
    help=(
        "Turn a single-GPU PyTorch training script into a distributed one, with a diff you can review.\n\n"
        "\b\nExample:\n  migrate to-ddp train.py | less        # review the diff\n"
        "  migrate to-ddp --write train.py       # apply it\n"
        "  migrate verify --fake-data train.py   # run both, check the ranks"
    ),
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

Paths = Annotated[list[str], typer.Argument(metavar="PATH...", hidden=True, show_default=False)]


class PlainUsage(TyperCommand):
    """Usage lines as people write them (`migrate to-ddp [OPTIONS] PATH...`): each argument by its
    metavar, without typer's braces; the arguments themselves are described in the help text."""

    def collect_usage_pieces(self, ctx: ClickContext) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        return pieces + [param.metavar for param in self.params if param.param_type_name == "argument" and param.metavar]
Write = Annotated[bool, typer.Option("--write", help="Rewrite the files in place (atomically).")]


def write_help(target: Target) -> str:
    """--write's help for a target, naming what it creates beside each script: the launch script
    when the target has a launcher (to-dp has none), the config when it writes one (--config-out)."""
    made = ["the launch script"] if target.launcher else []
    if "config_out" in {option.name for option in dataclasses.fields(target.options_class)}:
        made.append("its config")
    if not made:
        return ("Rewrite the files in place (atomically); no launcher or config is written: the converted "
                "script runs with `python` as before.")
    return f"Rewrite the files in place and create {' and '.join(made)} beside each (atomically)."
Check = Annotated[bool, typer.Option("--check", help="Write nothing; list the files that would change; exit 1 if any (plus 2 if --write would refuse one).")]
Exclude = Annotated[Optional[list[str]], typer.Option("--exclude", metavar="GLOB", help="Skip files a folder search finds whose path (relative to the folder) or any folder on the way matches GLOB; repeatable. Example: --exclude 'tests' --exclude '*_old.py'")]
ReportFormat = Annotated[str, typer.Option("--report", metavar="FORMAT", help="How findings are reported (on stderr, or in --report-out's file): text, markdown (a pull-request description: each change and why, the findings, the files created, the launch command), json, sarif (SARIF 2.1.0, for code scanning) or github-review (the JSON body of a pull-request review whose suggestions, all accepted, give the --write result).")]
ReportOut = Annotated[Optional[str], typer.Option("--report-out", metavar="PATH", help="Write the report to PATH (atomically) instead of stderr.", show_default=False)]
VerifyReport = Annotated[Optional[str], typer.Option("--verify-report", metavar="PATH", help="With --report markdown: add the result of `migrate verify` from the JSON that `migrate verify --report json` printed.", show_default=False)]
Jobs = Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, metavar="N", help="Convert N files at a time, in N processes (default: the number of cores); the output is the same as with -j 1.", show_default=False)]
Quiet = Annotated[bool, typer.Option("--quiet", help="No progress line and no closing summary table.")]
# the --report formats of the to-<target> commands
REPORTS = ("text", "markdown", "json", "sarif", "github-review")
# those that are one JSON document: nothing else may share stderr with them
JSON_REPORTS = ("json", "sarif", "github-review")


def tool_version() -> str:
    """torch-migrate's installed version, or a word saying it is not installed."""
    from migrate.review.sarif import installed_version

    return installed_version()


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"migrate (torch-migrate) {tool_version()}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _commands(
    show_version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Turn a single-GPU PyTorch training script into a distributed one, with a diff you can review."""


def _refuse_bad(target: str, options: Options) -> None:
    """The options' first problem as a usage error (exit 2), in the words the library uses too."""
    from migrate.options import problems

    found = problems(targets()[target], options)
    if found:
        raise typer.BadParameter(found[0].message, param_hint=found[0].flag)


def _one_mode(write: bool, check: bool) -> None:
    if write and check:
        raise typer.BadParameter("--write and --check exclude each other: --check writes nothing", param_hint="--write/--check")


def _convert_command(target: Target) -> None:
    """`migrate to-<name>`: the shared options (paths, --write, --check, --report, --exclude) and
    the target's own, which its `command_options` function declares and turns into its options class."""
    own = _parameters(target.command_options) if target.command_options is not None else []

    def command(paths: Paths, write: Write = False, check: Check = False, report: ReportFormat = "text",
                report_out: ReportOut = None, verify_report: VerifyReport = None, exclude: Exclude = None,
                jobs: Jobs = None, quiet: Quiet = False, **own_values: object) -> None:
        _one_mode(write, check)
        options = target.command_options(**own_values) if target.command_options is not None else target.options_class()
        _refuse_bad(target.name, options)
        raise typer.Exit(run(target.name, paths, options, write=write, check=check, report=report,
                             exclude=tuple(exclude or ()), report_out=report_out, verify_report=verify_report,
                             jobs=jobs, quiet=quiet))

    shared = [p for p in _parameters(command) if p.kind is not inspect.Parameter.VAR_KEYWORD]
    shared = [p.replace(annotation=Annotated[bool, typer.Option("--write", help=write_help(target))])
              if p.name == "write" else p for p in shared]
    # the target's options first in --help, as they are what a user came to choose
    parameters = [shared[0], *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own),
                  *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in shared[1:])]
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # a function's __signature__, read by inspect.signature, is not in typeshed's FunctionType
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = (f"{target.summary[:-1]}. PATH: training scripts, or folders searched for *.py.\n\n"
                       f"{target.description}\n\n\b\nExample:\n  {target.example}")
    app.command(f"to-{target.name}", cls=PlainUsage, short_help=target.summary)(command)


def _parameters(function: Callable[..., object]) -> list[inspect.Parameter]:
    return list(inspect.signature(function, eval_str=True).parameters.values())


def _planned_command(target: Target) -> None:
    """A target that is planned: listed in --help, so users see what is coming, and refused."""

    def planned(paths: Annotated[Optional[list[str]], typer.Argument(metavar="PATH...", hidden=True)] = None) -> None:
        names = [f"to-{name}" for name in available()]
        built = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        _error(f"to-{target.name} ({target.framework}) is planned and not available yet; nothing was changed. "
               f"Available now: {built}")
        raise typer.Exit(EXIT_BAD_INPUT)

    planned.__doc__ = target.summary
    app.command(f"to-{target.name}", cls=PlainUsage, short_help=target.summary)(planned)


for _target in REGISTRY:
    if _target.available:
        _convert_command(_target)


def _verifiable() -> list[str]:
    """Targets whose converted scripts `verify` can launch as several processes."""
    return [name for name, target in available().items() if target.launcher is not None]


def _verify_conversion_options(target: str, zero: int, compare: bool) -> Options:
    """The conversion verify runs, as the target says (Target.verify_options: DeepSpeed's --zero;
    for --compare, Horovod without its lr scaling); else the defaults."""
    spec = targets()[target]
    return spec.verify_options(zero, compare) if spec.verify_options is not None else spec.options_class()


@app.command("verify", cls=PlainUsage, short_help="Run the original and the converted script; check ranks, data, output.")
def verify(
    script: Annotated[str, typer.Argument(metavar="SCRIPT", hidden=True, help="The single-GPU training script to convert and check.", show_default=False)],
    script_args: Annotated[Optional[list[str]], typer.Argument(metavar="[-- SCRIPT_ARGS...]", hidden=True, show_default=False)] = None,
    target: Annotated[str, typer.Option("--target", metavar="|".join(_verifiable()), help="The conversion to check.")] = "ddp",
    converted: Annotated[Optional[str], typer.Option("--converted", metavar="PATH", help="Check this already converted script instead of converting SCRIPT.")] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, metavar="N", help="Optimizer steps each run takes before it is stopped.")] = 3,
    nproc: Annotated[int, typer.Option("--nproc", min=2, metavar="N", help="Processes the converted script runs with.")] = 2,
    timeout: Annotated[float, typer.Option("--timeout", min=5, metavar="SECONDS", help="A run whose ranks make no progress (no step, no record, no CPU time) for this long is hung; where each waits is reported.")] = 180.0,
    max_time: Annotated[Optional[float], typer.Option("--max-time", min=5, metavar="SECONDS", help="Stop a run that still works after this long, reported as still working (default: 20 times --timeout).", show_default=False)] = None,
    to_end: Annotated[bool, typer.Option("--to-end", help="Run the script to completion on every rank (evaluation, saves, sampling after training), not just --steps steps; every check still applies.")] = False,
    then: Annotated[Optional[str], typer.Option("--then", metavar="ARGS", help="Run each script a second time in the folder its first run left, with ARGS added (e.g. --then \"--resume\"), and check that the converted one resumes as the original does.", show_default=False)] = None,
    fake_data: Annotated[bool, typer.Option("--fake-data", help="Replace torchvision datasets (MNIST, CIFAR, ImageFolder...) with small synthetic ones: offline and fast.")] = False,
    compare: Annotated[bool, typer.Option("--compare", help="Deterministic scripts: also compare each step's loss and the final weights with the original run at nproc times its batch (shuffling turned off in both; to-horovod converts without its lr scaling for it).")] = False,
    gpu: Annotated[bool, typer.Option("--gpu", help="Run on the GPUs (NCCL, one process per GPU) instead of the CPU with gloo.")] = False,
    pretend_gpu: Annotated[bool, typer.Option("--pretend-gpu", help="Run the GPU path on the CPU: torch believes each rank has a GPU; a GPU tensor meeting a CPU one, or NCCL given a CPU tensor, fails with the script's line (ddp, fsdp, horovod).")] = False,
    zero: Zero = 2,
    report: Annotated[str, typer.Option("--report", metavar="FORMAT", help="text, markdown or json (on stdout).")] = "text",
    keep: Annotated[Optional[str], typer.Option("--keep", metavar="FOLDER", help="Keep the copies and per-rank records in FOLDER (a new or empty folder, not one that holds the script's folder).")] = None,
) -> None:
    """Prove a conversion on your own script: run the original and the converted script, compare.
    SCRIPT: the single-GPU training script; SCRIPT_ARGS (after `--`): its arguments.

    Converts SCRIPT into a private copy of its folder (your files are only read; a write through a
    link goes to a copy), runs the original as one process and the converted script with --nproc
    processes under the target's launcher (torchrun; the deepspeed launcher; horovodrun), on the CPU with gloo, for --steps optimizer steps
    each. Checks: every rank reaches the steps; no rank hangs (its stack is shown); parameters stay
    identical across ranks; ranks see different samples; output and files come from rank 0 only;
    checkpoints keep the original's state-dict layout. Exit 0 passed, 1 a check failed, 2 could not
    run (bad input, or the original script itself fails).

    \b
    Example:
      migrate verify --fake-data train.py -- --epochs 1 --batch-size 8
    """
    from migrate.verify.report import RENDER
    from migrate.verify.session import VerifyOptions
    from migrate.verify.session import verify as run_verify

    if target not in _verifiable():
        raise typer.BadParameter(f"{target!r}: choose {' or '.join(_verifiable())}", param_hint="--target")
    if report not in RENDER:
        raise typer.BadParameter(f"{report!r}: choose text, markdown or json", param_hint="--report")
    if pretend_gpu and gpu:
        raise typer.BadParameter("runs on real GPUs: --pretend-gpu is for a machine without one", param_hint="--gpu")
    refusal = targets()[target].pretend_gpu_refusal
    if pretend_gpu and refusal is not None:
        raise typer.BadParameter(refusal, param_hint="--pretend-gpu")
    options = VerifyOptions(target=target, steps=steps, nproc=nproc, timeout=timeout, fake_data=fake_data, gpu=gpu, compare=compare,
                            converted=converted, script_args=tuple(script_args or ()), keep=keep,
                            options=_verify_conversion_options(target, zero, compare), to_end=to_end, max_time=max_time,
                            then=_then_arguments(then), pretend_gpu=pretend_gpu)
    try:
        result = run_verify(script, options)
    except InputError as error:
        _error(str(error))
        if report != "text":  # a tool reading stdout gets the error as a report too
            sys.stdout.write(RENDER[report](_verify_error(script, target, str(error))))
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM/SIGHUP (Interrupted): everything started is gone
        _error(f"verify interrupted: its processes were stopped{'' if keep else ' and its work folder removed'}")
        raise typer.Exit(128 + getattr(interrupt, "signum", 2)) from None
    sys.stdout.write(RENDER[report](result))
    raise typer.Exit(result.exit_code)


def _then_arguments(then: str | None) -> tuple[str, ...] | None:
    """--then's string as arguments (split like a shell would)."""
    if then is None:
        return None
    try:
        return tuple(shlex.split(then))
    except ValueError as error:
        raise typer.BadParameter(f"{then!r}: {error}", param_hint="--then") from None


def _verify_error(script: str, target: str, message: str) -> "VerifyResult":
    """The report of a verification that could not run (VerifyResult, imported when verify runs)."""
    from migrate.verify.checks import VerifyResult

    return VerifyResult.cannot_run(script, target, message)


app.command("launch", cls=PlainUsage, short_help="Write the launcher for a converted script: one node, several, "
            "SLURM or Kubernetes.")(launch)
app.command("advise", cls=PlainUsage, short_help="Say which framework to convert to, and the memory per GPU each "
            "way of sharding takes.")(advise)
app.command("doctor", cls=PlainUsage, short_help="Check the environment before a launch: torch, GPUs, "
            "launcher variables, /dev/shm, the port, a real all-reduce.")(doctor)
app.command("check", cls=PlainUsage, short_help="Lint a script that is already distributed for pitfalls "
            "that break training or hang it.")(check)

for _target in REGISTRY:
    if not _target.available:
        _planned_command(_target)


def run(target: str, paths: list[str], options: Options, write: bool, check: bool, report: str,
        exclude: tuple[str, ...] = (), report_out: str | None = None, verify_report: str | None = None,
        jobs: int | None = None, quiet: bool = False) -> int:
    """Convert (in `jobs` processes; the output does not depend on it), then print or write.
    Returns the exit status."""
    from migrate.paths import select

    if report not in REPORTS:
        _error(f"--report: unknown format {report!r} ({', '.join(REPORTS)})")
        return EXIT_BAD_INPUT
    verified = _verify_report(verify_report, report)
    if isinstance(verified, str):
        _error(verified)
        return EXIT_BAD_INPUT
    out = Output(report, targets()[target].framework, report_out, target=target, verified=verified, quiet=quiet)
    selection = select(paths, exclude)
    out.errors.extend(selection.errors)
    results: list[FileResult] = []
    searched: set[str] = set()
    outcomes = convert_all([found.path for found in selection.files], target, options, jobs, out.progress())
    for found, outcome in zip(selection.files, outcomes):
        if isinstance(outcome, InputError):
            out.errors.append(outcome)
            continue
        results.append(outcome)
        if not found.named:
            searched.add(outcome.path)
    from migrate.api import settle

    results, errors, notes = settle(results, target, options)
    out.errors.extend(errors)
    for path, message in notes:
        out.note(path, message)
    if report_out is not None and not _report_out_usable(report_out, results):
        return EXIT_BAD_INPUT
    changed = [r for r in results if r.changed and not r.error]
    status = EXIT_BAD_INPUT if out.errors or any(r.error for r in results) else EXIT_OK
    if check:
        out.stdout_lines([out.name(r.path) for r in changed])
        status |= EXIT_WOULD_CHANGE if changed else EXIT_OK
        status |= _check_refusals(changed, out)
    elif write:
        if status == EXIT_OK:
            status = _write_all(changed, out)
    else:
        status = _print_diff(changed, out) or status
    if not out.finish(results, searched, selection.searched, written=write and status == EXIT_OK):
        status |= EXIT_BAD_INPUT
    return status


def _verify_report(path: str | None, report: str) -> dict[str, object] | str | None:
    """--verify-report's document, or the message saying why it cannot be used."""
    if path is None:
        return None
    if report != "markdown":
        return f"--verify-report goes into the pull-request description: add --report markdown (not {report})"
    from migrate.review.description import read_verify_report

    try:
        return read_verify_report(path)
    except InputError as error:
        return f"{error} (--verify-report)"


def default_jobs() -> int:
    """The cores this process may run on."""
    counted = getattr(os, "process_cpu_count", None)
    if counted is not None:
        return counted() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def convert_all(paths: list[str], target: str, options: Options, jobs: int | None,
                progress: "Progress") -> list[FileResult | InputError]:
    """Each file's conversion, in the order given: in this process for one job or one file,
    otherwise in a pool of processes (the conversion is CPU-bound pure Python); where no pool can
    run (no semaphores, a worker killed), in this process after all."""
    workers = min(jobs or default_jobs(), len(paths))
    progress.start(len(paths))
    try:
        if workers > 1:
            from concurrent.futures.process import BrokenProcessPool  # here: not on `migrate --help`'s path

            try:
                return _in_pool(paths, target, options, workers, progress)
            except (OSError, BrokenProcessPool):
                progress.start(len(paths))
        return [progress.advance(_convert_one(path, target, options)) for path in paths]
    finally:
        progress.end()


def _in_pool(paths: list[str], target: str, options: Options, workers: int,
             progress: "Progress") -> list[FileResult | InputError]:
    """The conversions in `workers` processes, results in the order of `paths`. Ctrl-C stops the
    run at once (the workers ignore it; the files not started are dropped)."""
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=workers, initializer=_ignore_interrupts)
    chunk = max(1, min(8, len(paths) // (workers * 16)))  # small: every worker busy to the end
    try:
        outcomes = pool.map(_convert_one, paths, [target] * len(paths), [options] * len(paths), chunksize=chunk)
        done = [progress.advance(outcome) for outcome in outcomes]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return done


def _ignore_interrupts() -> None:
    """A worker leaves Ctrl-C to the parent, which stops the run."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _convert_one(path: str, target: str, options: Options) -> FileResult | InputError:
    """One file's conversion (what a worker process runs)."""
    from migrate import api

    return api.migrate_file(path, target, options)


class Progress:
    """`migrate: 12/30 files` on stderr, rewritten in place, and cleared at the end: only when
    stderr is a terminal, NO_COLOR is not set, the run is not --quiet and stderr is not a JSON report."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.total = self.done = 0

    def start(self, total: int) -> None:
        self.total, self.done = total, 0
        self.enabled = self.enabled and total > 1

    def advance(self, outcome: "FileResult | InputError") -> "FileResult | InputError":
        self.done += 1
        if self.enabled:
            _stderr(f"\rmigrate: {self.done}/{self.total} files\x1b[K")
        return outcome

    def end(self) -> None:
        if self.enabled:
            _stderr("\r\x1b[K")


def _report_out_usable(path: str, results: list[FileResult]) -> bool:
    """--report-out must name a file that is neither a folder nor a file the run converts or
    creates (a script, its launcher or config): said, and False, otherwise."""
    real = os.path.realpath(path)
    if os.path.isdir(real):
        _error(f"{path}: --report-out names a folder; give a file name")
        return False
    ours = [r.path for r in results] + [a.path for r in results for a in r.artifacts]
    if any(os.path.realpath(p) == real for p in ours):
        _error(f"{path}: --report-out names a file this run converts or creates; give another name")
        return False
    return True


def _print_diff(changed: list[FileResult], out: "Output") -> int:
    """The diff on stdout, each file in its own encoding; what `--write` would refuse on stderr."""
    from migrate import report as reports
    from migrate import writing

    base = reports.diff_base([r.path for r in changed] + [a.path for r in changed for a in r.artifacts])
    if base != os.getcwd() and changed:
        out.note("", f"the diff names files relative to {base} (some lie outside the current folder): "
                     f"apply it there, e.g. cd {shlex.quote(base)} && git apply")
    plan = writing.plan(changed)
    for problem in plan.problems:
        out.note(problem.path, f"--write would refuse: {problem.message}")
    colour = out.colour()
    for result in changed:
        diff = reports.result_diff(result, base)
        if not out.stdout_bytes(reports.coloured(diff) if colour else diff):
            return EXIT_BAD_INPUT
    if not changed and not out.errors:
        out.note("", "nothing to change (the findings above say why)")
    return EXIT_OK


def _check_refusals(changed: list[FileResult], out: "Output") -> int:
    """`--check` plans the write as `--write` would: each refusal is an error naming the file."""
    from migrate import writing

    problems = writing.plan(changed).problems
    out.errors.extend(InputError(p.path, p.line, p.col, f"--write would refuse: {p.message}") for p in problems)
    return EXIT_BAD_INPUT if problems else EXIT_OK


def _write_all(changed: list[FileResult], out: "Output") -> int:
    """Check every output first; write nothing if any is refused; then every file of every script
    as one unit (migrate.writing): a failure leaves every file as it was."""
    from migrate import writing

    plan = writing.plan(changed)
    if plan.problems:
        out.errors.extend(plan.problems)
        out.note("", "nothing was written")
        return EXIT_BAD_INPUT
    for note in plan.notes:
        out.note("", note)
    try:
        writing.write([output for batch in plan.batches for output in batch])
    except InputError as error:
        out.errors.append(error)
        return EXIT_BAD_INPUT
    for result, batch in zip(changed, plan.batches):
        created = ", ".join(out.name(o.path) for o in batch if o.path != result.path)
        out.stdout_lines([f"converted {out.name(result.path)}" + (f"; wrote {created}" if created else "")])
    return EXIT_OK


class Output:
    """Everything a run prints. Findings, errors and notes are the report, on stderr or in the
    --report-out file: one JSON document with --report json, sarif or github-review (nothing else
    there), the pull-request description with markdown, otherwise lines. A closed or full stdout is
    an error."""

    def __init__(self, report: str, framework: str = "", report_out: str | None = None, target: str = "",
                 verified: dict[str, object] | None = None, quiet: bool = False) -> None:
        self.report = report
        self.framework = framework  # the target's, for the review's reasons
        self.report_out = report_out
        self.target = target  # the CLI name, for the description's launch commands
        self.verified = verified  # --verify-report's document, for the description
        self.quiet = quiet
        self.errors: list[InputError] = []
        self.notes: list[tuple[str, str]] = []
        self.stdout_failed = False

    def progress(self) -> Progress:
        """The progress line: on a terminal's stderr only, and not where stderr holds a JSON document."""
        json_on_stderr = self.report in JSON_REPORTS and self.report_out is None
        return Progress(not self.quiet and not json_on_stderr and _terminal(sys.stderr))

    def colour(self) -> bool:
        """Whether the diff is coloured: stdout is a terminal and NO_COLOR is not set."""
        return _terminal(sys.stdout)

    @staticmethod
    def name(path: str) -> str:
        from migrate.report import display_path

        return display_path(path)

    def note(self, path: str, message: str) -> None:
        self.notes.append((path, message))

    def stdout_lines(self, lines: list[str]) -> bool:
        return self.stdout_bytes("".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape"))

    def stdout_bytes(self, data: bytes) -> bool:
        """Write to stdout; on a closed pipe, a full disk or no stdout at all, record an error."""
        if not data or self.stdout_failed:
            return not self.stdout_failed
        try:
            stream = sys.stdout.buffer
            stream.write(data)
            stream.flush()
        except (OSError, AttributeError, ValueError) as error:
            self.stdout_failed = True
            reason = getattr(error, "strerror", None) or "standard output is closed"
            self.errors.append(InputError("<stdout>", 0, 0, f"cannot write the output: {reason}"))
            _silence_stdout()
            return False
        return True

    def finish(self, results: list[FileResult], searched: set[str], folders: list[str], written: bool) -> bool:
        """Report findings (MIG002 for files a folder search found is a count, not a line each),
        then errors and notes, then a summary of the folder search. False if --report-out failed."""
        if self.report in JSON_REPORTS:
            return self.emit(self.document(results) + "\n")
        return self.emit("".join(line + "\n" for line in self.lines(results, searched, folders, written)))

    def entries(self, results: list[FileResult]) -> list[dict[str, object]]:
        """Every finding, error and note as `--report json` lists them."""
        from migrate import report as reports

        entries: list[dict[str, object]] = json.loads(reports.findings_json(results))
        entries += [{"path": e.path, "line": e.line, "col": e.col, "code": e.code, "severity": "error",
                     "message": e.message} for e in self.errors]
        entries += [{"path": p, "line": 0, "col": 0, "code": "MIG005", "severity": "note", "message": m}
                    for p, m in self.notes]
        return entries

    def document(self, results: list[FileResult]) -> str:
        """The one JSON document of --report json, sarif or github-review."""
        from migrate.review.github_review import review
        from migrate.review.sarif import sarif_log

        if self.report == "sarif":
            return json.dumps(sarif_log(self.entries(results), tool_version()), indent=2)
        if self.report == "github-review":
            messages = [f"error: {error}" for error in self.errors]
            messages += [f"{self.name(p)}: {m}" if p else m for p, m in self.notes]
            return json.dumps(review(results, self.framework, messages), indent=2)
        return json.dumps(self.entries(results), indent=2)

    def lines(self, results: list[FileResult], searched: set[str], folders: list[str], written: bool) -> list[str]:
        """The text report, or the markdown description, line by line."""
        from migrate import report as reports

        quiet = [r for r in results if r.path in searched and _only_not_training(r)]
        shown, advised = advised_once([r for r in results if r not in quiet])
        said = [str(error) for error in self.errors]
        said += [f"{self.name(path)}: {message}" if path else message for path, message in self.notes]
        said += [f"{code} above is said once: it applies alike to each of the {count} files that drew it"
                 for code, count in advised.items()]
        if folders:
            said.append(_summary(results, len(quiet), len(self.errors), written))
        if self.report == "markdown":
            return [self.describe(shown, said).rstrip("\n")]
        lines = [line for result in shown for line in reports.findings_text(result)]
        lines += [f"migrate: {line}" for line in said]
        if folders and not self.quiet:
            lines += summary_table(results, len(self.errors), said_once=set(advised))
        return lines

    def describe(self, results: list[FileResult], messages: list[str]) -> str:
        """The pull-request description (migrate.review.description) of the run."""
        from migrate.review.description import Run, description

        launcher = targets()[self.target].launcher if self.target else None
        return description(results, Run(self.target, self.framework, launcher.name if launcher else None,
                                        launcher.several_nodes_example if launcher else ""),
                           self.verified, messages)

    def emit(self, text: str) -> bool:
        """The report on stderr, or written atomically to --report-out (an error there is said on stderr)."""
        from migrate import writing

        if self.report_out is None:
            _stderr(text)
            return True
        data = text.encode("utf-8", "backslashreplace")
        try:
            writing.write([writing.Output(self.report_out, data, script=self.report_out)])
        except InputError as error:
            _error(f"{error} (--report-out; the report was not written)")
            return False
        return True


def advised_once(results: list[FileResult]) -> tuple[list[FileResult], dict[str, int]]:
    """The results with each ADVISORY finding kept at its first file only, and, for each code said
    once for several files, how many files drew it (text and markdown; JSON keeps every entry)."""
    drew: dict[str, int] = {}
    shown: list[FileResult] = []
    for result in results:
        said_before = set(drew)
        kept = tuple(f for f in result.findings if f.code not in said_before)
        for code in {f.code for f in result.findings} & ADVISORY:
            drew[code] = drew.get(code, 0) + 1
        shown.append(dataclasses.replace(result, findings=kept) if len(kept) < len(result.findings) else result)
    return shown, {code: count for code, count in drew.items() if count > 1}


def _only_not_training(result: FileResult) -> bool:
    return result.skipped and all(f.code == "MIG002" for f in result.findings)


def _summary(results: list[FileResult], not_training: int, errors: int, written: bool) -> str:
    converted = sum(1 for r in results if r.changed and not r.error)
    already = sum(1 for r in results if any(f.code == "MIG001" for f in r.findings))
    left = len(results) - converted - already - not_training
    verb = "converted" if written else "to convert"
    parts = [f"{converted} {verb}" if converted else f"none {verb}",
             f"{counted(not_training, 'not training script')} (MIG002, not listed)" if not_training else "",
             f"{already} already distributed" if already else "",
             f"{left} left unchanged with findings" if left > 0 else "",
             counted(errors, "error") if errors else ""]
    return f"{counted(len(results) + errors, 'Python file')}: " + ", ".join(p for p in parts if p)


def summary_table(results: list[FileResult], errors: int, said_once: AbstractSet[str] = frozenset()) -> list[str]:
    """The closing table of a folder run: files changed, unchanged, with errors; findings by code
    (but the codes `said_once`, whose line above already counts their files)."""
    failed = errors + sum(1 for r in results if r.error)
    changed = sum(1 for r in results if r.changed and not r.error)
    codes: dict[str, int] = {}
    for result in results:
        for finding in result.findings:
            if finding.code not in said_once:
                codes[finding.code] = codes.get(finding.code, 0) + 1
    rows = [("changed", str(changed)), ("unchanged", str(len(results) - changed - sum(1 for r in results if r.error))),
            ("errors", str(failed))]
    rows += [(f"findings {code}", str(count)) for code, count in sorted(codes.items())]
    width = max(len(name) for name, _ in rows)
    return ["migrate: summary"] + [f"  {name:<{width}}  {value:>5}" for name, value in rows]


def _terminal(stream: IO[str]) -> bool:
    """Whether a stream is a terminal a person watches, and NO_COLOR (any value) is not set."""
    if "NO_COLOR" in os.environ:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def counted(count: int, noun: str) -> str:
    """`1 error`, `2 errors`: a count and its noun, singular for exactly one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _silence_stdout() -> None:
    """After stdout failed, point it at /dev/null so Python's exit-time flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def _stderr(text: str) -> None:
    try:
        sys.stderr.write(text)
    except (OSError, ValueError, AttributeError):
        pass
    except UnicodeEncodeError:
        sys.stderr.write(text.encode("ascii", "backslashreplace").decode("ascii"))


def _error(message: str) -> None:
    _stderr(f"migrate: {message}\n")


# click's base of usage errors, whether typer vendors click (0.29: typer._click) or depends on it
if TYPE_CHECKING:  # the typer installed for type checking vendors it
    from typer._click.exceptions import ClickException as CLICK_EXCEPTION
else:
    CLICK_EXCEPTION = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def main() -> None:
    """Run the command line. A usage error reads as click writes it, or, under `--report json` or
    `sarif`, as the one JSON document stderr holds then (code MIG900), so a CI step can always parse it."""
    command = typer.main.get_command(app)
    try:
        status = command.main(prog_name="migrate", standalone_mode=False)
    except CLICK_EXCEPTION as error:
        requested = _report_requested(sys.argv[1:])
        if requested in ("json", "sarif"):
            entry: dict[str, object] = {"path": "", "line": 0, "col": 0, "code": "MIG900", "severity": "error",
                                        "message": f"usage: {error.format_message()}"}
            _stderr(json.dumps([entry] if requested == "json" else _sarif([entry]), indent=2) + "\n")
        else:
            error.show()
            if type(error).__name__ == "NoSuchOption" and sys.argv[1:2] == ["launch"]:
                _error("arguments for the training script go after `--`, e.g. "
                       "migrate launch ddp train.py --nnodes 2 -- --epochs 3")
        sys.exit(error.exit_code)
    except typer.Abort:
        _error("interrupted")
        sys.exit(130)
    sys.exit(status if isinstance(status, int) else EXIT_OK)


def _report_requested(arguments: list[str]) -> str | None:
    """The `--report` format the command line asks for (either spelling; the last one counts, as
    for click), before any `--`."""
    arguments = arguments[: arguments.index("--")] if "--" in arguments else arguments
    found = None
    for argument, following in zip(arguments, [*arguments[1:], ""]):
        if argument.startswith("--report="):
            found = argument.partition("=")[2]
        elif argument == "--report":
            found = following
    return found


def _sarif(entries: list[dict[str, object]]) -> dict[str, object]:
    from migrate.review.sarif import sarif_log

    return sarif_log(entries, tool_version())
