"""Runs one verification: convert into a private copy of the script's folder (sandbox.py), launch
the original and the converted script under the runner (processes.py watches and ends each
launch), read back what every rank recorded, and check it (checks.py).

- The original runs as one process, the converted script under its target's launcher (torchrun,
  the deepspeed launcher, horovodrun), each in its own view of the work folder; the work folder is
  removed at the end (unless --keep), and every process started is gone. The conversion reads the
  modules the script imports from the user's folder, as the command line's does; where its launcher
  passes `--no_local_rank` (MIG601), so does the launch here.
- A launch is stopped when no rank made progress for --timeout seconds (a hang), or at --max-time
  (default 20 times --timeout) while still working; see processes.py.
- `--to-end` lets each rank run the script to completion (the runner still records every step).
- `--then ARGS` runs each script a second time in the folder its first run left, with ARGS added
  (`--resume`), and checks that the converted one resumes as the original does (resume.py).
- A script already converted in place (MIG001) is checked against its committed version as the
  original (committed.py); DeepSpeed's CPU op is built or found before the clock (deepspeed_op.py);
  torchrun's log folder goes into the work folder (not a torchelastic_* folder left in TMPDIR).
- The ranks get this environment's bin folder first on PATH (its ninja) and TORCH_EXTENSIONS_DIR.
GPUs are hidden unless `gpu=True`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from migrate.records import Artifact, FileResult, InputError
from migrate.target_options import Options
from migrate.verify.checks import Launch, VerifyResult, check_all, read_records
from migrate.verify.committed import Unavailable, already_converted, committed_text, suggestion
from migrate.verify.deepspeed_op import extensions_folder
from migrate.verify.deepspeed_op import prepare as prepare_deepspeed_op
from migrate.verify.processes import (TAG, Interrupted, ProcessTree, Watch, free_port, output_tail,
                                      remove_deepspeed_buffers, set_subreaper, signals_blocked, signals_raise,
                                      supervise)
from migrate.verify.resume import check_resume, with_resume
from migrate.verify.sandbox import (COPY_LIMIT, Sandbox, build, named_for_user, user_path, work_folder,
                                    write_private)

LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")
START_ALLOWANCE = 60.0  # seconds of no progress a launch may add before every rank has started (rendezvous)
TERM_GRACE = 3.0  # seconds between SIGTERM (ranks dump their stacks) and SIGKILL
CEILING = 20  # --max-time defaults to this many times --timeout
RUNNER_MARGIN = 60.0  # the runner's own last-resort watchdog fires this long after --max-time


@dataclass(frozen=True)
class VerifyOptions:
    target: str = "ddp"
    steps: int = 3
    nproc: int = 2
    timeout: float = 120.0  # seconds without progress that make a hang
    fake_data: bool = False
    gpu: bool = False
    compare: bool = False  # also compare losses and weights with the original at nproc times its batch
    converted: str | None = None  # an already converted script to check instead of converting
    script_args: tuple[str, ...] = ()
    options: Options | None = None  # the conversion's options; None: the target's defaults
    keep: str | None = None  # keep the work folder here (for debugging): a new or empty folder
    to_end: bool = False  # run the script to completion on every rank
    max_time: float | None = None  # the ceiling of a launch that still works; None: CEILING x timeout
    then: tuple[str, ...] | None = None  # --then: run each script again in its folder with these arguments added
    pretend_gpu: bool = False  # the GPU path on the CPU (migrate/verify/pretend_gpu.py)

    @property
    def ceiling(self) -> float:
        return self.max_time if self.max_time is not None else CEILING * self.timeout


def verify(script: str, options: VerifyOptions) -> VerifyResult:
    """Run every check on `script`. Raises InputError when the script, its folder or --keep cannot
    be used; Interrupted (a KeyboardInterrupt) on SIGTERM or SIGHUP, after cleaning up."""
    from migrate.sources import read_source

    source, _ = read_source(script)
    folder = Path(os.path.abspath(script)).parent  # as the user names it: `train.py` may be a link
    work = work_folder(options.keep, folder)
    with signals_raise():
        processes = ProcessTree()
        try:
            sandbox = Sandbox(folder=folder, work=work)
            result = convert_and_run(script, source, sandbox, processes, options)
            return named_for_user(result, sandbox)
        except InputError as error:
            raise InputError(user_path(error.path, work, folder), error.line, error.col, error.message) from None
        finally:
            with signals_blocked():
                processes.close()
                if not options.keep:
                    shutil.rmtree(work, ignore_errors=True)


def convert_and_run(script: str, source: str, sandbox: Sandbox, processes: ProcessTree,
                    options: VerifyOptions) -> VerifyResult:
    """Convert (paths name the converted view), copy the folder, launch both, check."""
    name = Path(script).name
    conversion = conversion_of(script, source, sandbox, options)
    if isinstance(conversion, VerifyResult):
        return conversion
    build(sandbox, name)
    if conversion.old != source:  # the committed original of a script converted in place
        write_private(sandbox.original / name, conversion.old, sandbox.work)
    write_private(sandbox.converted / name, conversion.new, sandbox.work)
    for module in conversion.modules:  # the modules of its project the conversion edits (issue 27)
        write_private(Path(module.path), module.new, sandbox.work)
    for artifact in conversion.artifacts:
        text = partitioned(artifact.text) if artifact.path.endswith(".json") else artifact.text
        write_private(Path(artifact.path), text, sandbox.work)
    launches = Launches(options, sandbox, processes, no_local_rank=passes_no_local_rank(conversion))
    original = launches.original(sandbox.original / name)
    converted = launches.converted(sandbox.converted / name)
    result = check_all(script, options.target, options.steps, options.nproc, original, converted,
                       conversion.findings, conversion.new, compare=options.compare, original_text=conversion.old)
    if options.to_end:
        result.ran_to_end = ran_to_end(converted, options.nproc)
    if options.then is not None and result.status != "error":
        agains = (launches.original(sandbox.original / name, "original-then", options.then),
                  launches.converted(sandbox.converted / name, "converted-then", options.then))
        check = check_resume(result, (original, converted), agains, options.then, conversion.findings,
                             conversion.new, conversion.old, options.compare)
        result = with_resume(result, check)
    result.notes[:0] = sandbox.notes
    return result


def ran_to_end(launch: Launch, nproc: int) -> bool:
    """Every rank ran the script to completion (ended by itself, no error, not stopped)."""
    ends = [launch.records[rank].end if rank in launch.records else None for rank in range(nproc)]
    return not launch.timed_out and all(end is not None and end.get("outcome") == "finished" for end in ends)


def conversion_of(script: str, source: str, sandbox: Sandbox, options: VerifyOptions) -> FileResult | VerifyResult:
    """The original and converted texts: SCRIPT and its conversion, or --converted's file, or (SCRIPT
    already converted in place) its committed version and SCRIPT; a result saying why none."""
    from migrate.sources import read_source

    path = str(sandbox.converted / Path(script).name)
    if options.converted:
        converted_text, _ = read_source(options.converted)
        return FileResult(path=path, old=source, new=converted_text)
    conversion = convert(script, source, options, path)
    if already_converted(conversion):
        return committed_conversion(script, source, sandbox, options, path)
    if conversion.error or conversion.new == conversion.old:
        return VerifyResult.cannot_run(script, options.target, f"the conversion left the script unchanged"
                                       f" ({findings_text(conversion)})", conversion.findings)
    return conversion


def committed_conversion(script: str, source: str, sandbox: Sandbox, options: VerifyOptions,
                         path: str) -> FileResult | VerifyResult:
    """SCRIPT (converted in place) against its committed version as the original (committed.py)."""
    try:
        committed = committed_text(script)
    except Unavailable as why:
        return VerifyResult.cannot_run(script, options.target, suggestion(script, options.target, str(why)))
    conversion = convert(script, committed, options, path)
    if conversion.error or conversion.new == conversion.old:
        reason = f"its committed version (git HEAD) is no single-GPU script to convert ({findings_text(conversion)})"
        return VerifyResult.cannot_run(script, options.target, suggestion(script, options.target, reason))
    sandbox.notes.append(f"{script} already uses the target (MIG001): verified as the converted script against"
                         " its committed version (git HEAD) as the original")
    made = tuple(as_written(artifact, sandbox) for artifact in conversion.artifacts)
    return FileResult(path=path, old=committed, new=source, findings=conversion.findings, artifacts=made)


def as_written(artifact: Artifact, sandbox: Sandbox) -> Artifact:
    """A file the conversion makes beside the script (a DeepSpeed config) as --write left it in the
    user's folder (the user's now), else as the conversion makes it."""
    mine = user_path(artifact.path, sandbox.work, sandbox.folder)
    return replace(artifact, text=Path(mine).read_text()) if os.path.isfile(mine) else artifact


def convert(script: str, source: str, options: VerifyOptions, path: str) -> FileResult:
    """The conversion, named by its path in the converted view, reading the modules the script imports
    from the user's folder (only read), as `migrate to-<target>` does."""
    from migrate.api import migrate_source
    from migrate.project_files import read_from_disk

    def read_module(module: str) -> str | None:
        return read_from_disk(os.path.join(os.path.dirname(os.path.abspath(script)),
                                           os.path.relpath(module, os.path.dirname(path))))

    try:
        return migrate_source(source, options.target, options.options, path=path, read_module=read_module)
    except InputError as error:  # about the user's text: name the user's script
        raise InputError(script, error.line, error.col, error.message) from None


def findings_text(conversion: FileResult) -> str:
    return "; ".join(f"{f.code} {f.message}" for f in conversion.findings) or "nothing to change"


def partitioned(config_text: str) -> str:
    """A ZeRO-3 config that partitions every parameter for the check: DeepSpeed keeps tensors under
    `stage3_param_persistence_threshold` (1e5 elements by default) whole on every rank, so a small
    model would never meet what partitioning breaks (empty `p.numel()`, a forward on one rank)."""
    config = json.loads(config_text)
    zero = config.get("zero_optimization", {})
    if zero.get("stage") != 3:
        return config_text
    zero["stage3_param_persistence_threshold"] = 0
    return json.dumps(config, indent=2) + "\n"


def passes_no_local_rank(conversion: FileResult) -> bool:
    """Whether the conversion's launcher passes the deepspeed launcher's `--no_local_rank` (MIG601: a
    module of the script's folder parses its arguments): verify launches the script the same way."""
    from migrate.targets.deepspeed import NO_LOCAL_RANK

    return any(f.code == NO_LOCAL_RANK for f in conversion.findings)


class Launches:
    """The two launches of a verification, each under the runner, in the work folder's views."""

    def __init__(self, options: VerifyOptions, sandbox: Sandbox, processes: ProcessTree,
                 no_local_rank: bool = False) -> None:
        self.options, self.sandbox, self.processes = options, sandbox, processes
        self.no_local_rank = no_local_rank  # the deepspeed launcher passes the script no --local_rank

    def original(self, script: Path, name: str = "original", then: tuple[str, ...] = ()) -> Launch:
        """The original as one process (`then`: the arguments --then adds for its second run)."""
        arguments = runner_arguments(script, self.record(name), self.options, self.sandbox.guard, self.options.nproc, then)
        return self.run(name, [sys.executable, "-m", "migrate.verify.runner", *arguments], script.parent, ranks=1)

    def converted(self, script: Path, name: str = "converted", then: tuple[str, ...] = ()) -> Launch:
        """The converted script under its target's own launcher (Target.launcher: the command is the
        launcher's `verify_command`)."""
        from migrate.launchers import VerifyLaunch
        from migrate.targets import targets

        launcher = targets()[self.options.target].launcher
        if launcher is None:
            raise InputError(str(script), 0, 0, f"verify cannot launch to-{self.options.target}'s scripts (one process)")
        runner = runner_arguments(script, self.record(name), self.options, self.sandbox.guard, then=then)
        if launcher.builds_cpu_op and not self.options.gpu:  # before the clock: the op's build is not the script's time
            self.sandbox.notes += prepare_deepspeed_op(environment(self.options, script.parent), self.options.ceiling)
        port = free_port()
        logs = self.sandbox.work / "torchelastic"  # not a torchelastic_* folder in TMPDIR, left when it is killed
        command = launcher.verify_command(VerifyLaunch(
            python=sys.executable, nproc=self.options.nproc, module="migrate.verify.runner", args=tuple(runner),
            port=port, logs=str(logs), no_local_rank=self.no_local_rank))
        try:
            return self.run(name, command, script.parent)
        finally:
            if launcher.builds_cpu_op:
                remove_deepspeed_buffers(port)

    def record(self, name: str) -> Path:
        return self.sandbox.work / "records" / name

    def run(self, name: str, command: list[str], cwd: Path, ranks: int | None = None) -> Launch:
        """One launch of `ranks` ranks (--nproc unless given), watched by processes.supervise
        until it ends, hangs (no progress for --timeout) or reaches --max-time."""
        record = self.record(name)
        record.mkdir(parents=True, exist_ok=True)
        log = record.parent / f"{name}.out"
        count = ranks if ranks is not None else self.options.nproc
        watch = Watch(timeout=self.options.timeout, max_time=self.options.ceiling, ranks=count,
                      start=START_ALLOWANCE, grace=TERM_GRACE)
        outcome = supervise(self.processes, name, command, cwd, environment(self.options, cwd), log, record, watch)
        changed = self.sandbox.changed_files()
        self.sandbox.notes += [f"warning: {path} changed while the {name} script ran: a subprocess or a native "
                               "library wrote through verify's read-only link to it" for path in changed]
        return Launch(outcome.returncode, output_tail(log), read_records(record), bool(outcome.stopped), str(record),
                      stopped=outcome.stopped, idle=outcome.idle, seconds=outcome.seconds, timeout=self.options.timeout)


def environment(options: VerifyOptions, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES and k != TAG}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    # the runs start in the copy: the caller's relative PYTHONPATH entries would point elsewhere
    inherited = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(folder), *inherited])
    # this environment's tools first (the ninja that builds DeepSpeed's op), and its extensions folder
    tools = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([tools, *(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != tools)])
    env["TORCH_EXTENSIONS_DIR"] = str(extensions_folder(os.environ))
    if not options.gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["DS_ACCELERATOR"] = "cpu"
    return env


def runner_arguments(script: Path, record: Path, options: VerifyOptions, guard: Path, batch_scale: int = 1,
                     then: tuple[str, ...] = ()) -> list[str]:
    """The runner's options: its own watchdog (--timeout) is a last resort past --max-time, since
    verify itself tells a hang from a slow rank."""
    arguments = ["--record", str(record), "--root", str(script.parent), "--steps", str(options.steps),
                 "--timeout", str(options.ceiling + RUNNER_MARGIN), "--guard", str(guard)]
    if options.to_end:
        arguments.append("--to-end")
    if options.fake_data:
        arguments.append("--fake-data")
    if options.pretend_gpu:
        arguments.append("--pretend-gpu")
    if options.compare:
        arguments += ["--compare-batch-scale", str(batch_scale)]
    return [*arguments, str(script), *options.script_args, *then]


__all__ = ["COPY_LIMIT", "InputError", "Interrupted", "Launch", "ProcessTree", "Sandbox", "VerifyOptions",
           "build", "named_for_user", "remove_deepspeed_buffers", "set_subreaper", "verify", "work_folder"]
