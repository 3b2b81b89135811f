"""Runs one verification: convert into a temporary copy, launch the original and the converted
script under the runner, read back what every rank recorded, and check it.

The user's folder is only read. Two copies of it are made (original, converted); small files are
copied, large ones (datasets, weights) linked. GPUs are hidden unless `gpu=True`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from migrate.model import FileResult, InputError, Options
from migrate.verify.checks import Launch, VerifyResult, check_all, read_records

COPY_LIMIT = 8 * 1024 * 1024  # files above this are linked, not copied
SKIPPED_FOLDERS = {".git", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache", "node_modules", ".corpus"}
LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")


@dataclass(frozen=True)
class VerifyOptions:
    target: str = "ddp"
    steps: int = 3
    nproc: int = 2
    timeout: float = 120.0
    fake_data: bool = False
    gpu: bool = False
    compare: bool = False  # also compare losses and weights with the original at nproc times its batch
    converted: str | None = None  # an already converted script to check instead of converting
    script_args: tuple[str, ...] = ()
    options: Options = field(default_factory=Options)
    keep: str | None = None  # keep the work folder here (for debugging)


def verify(script: str, options: VerifyOptions) -> VerifyResult:
    """Run every check on `script`. Raises InputError when the script cannot be read or parsed."""
    from migrate.api import migrate_source
    from migrate.sources import read_source

    source, _ = read_source(script)
    work = Path(options.keep).resolve() if options.keep else Path(tempfile.mkdtemp(prefix="migrate-verify-"))
    try:
        folder = Path(script).resolve().parent
        original_dir = copy_folder(folder, work / "original")
        converted_dir = copy_folder(folder, work / "converted")
        name = Path(script).name
        if options.converted:
            converted_text, _ = read_source(options.converted)
            conversion = FileResult(path=str(converted_dir / name), old=source, new=converted_text)
        else:
            conversion = migrate_source(source, options.target, options.options, path=str(converted_dir / name))
        if conversion.error or conversion.new == conversion.old:
            notes = "; ".join(f"{f.code} {f.message}" for f in conversion.findings) or "nothing to change"
            return VerifyResult.cannot_run(script, options.target, f"the conversion left the script unchanged ({notes})",
                                           conversion.findings)
        (converted_dir / name).write_text(conversion.new)
        for artifact in conversion.artifacts:
            Path(artifact.path).parent.mkdir(parents=True, exist_ok=True)
            Path(artifact.path).write_text(partitioned(artifact.text) if artifact.path.endswith(".json") else artifact.text)

        original = launch_original(original_dir / name, work / "records" / "original", options)
        converted = launch_converted(converted_dir / name, work / "records" / "converted", options)
        return check_all(script, options.target, options.steps, options.nproc, original, converted,
                         conversion.findings, conversion.new, compare=options.compare)
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)


def partitioned(config_text: str) -> str:
    """A ZeRO-3 config that partitions every parameter for the check: DeepSpeed keeps tensors under
    `stage3_param_persistence_threshold` (1e5 elements by default) whole on every rank, so a small
    model would never meet what partitioning breaks (empty `p.numel()`, a forward on one rank)."""
    import json

    config = json.loads(config_text)
    zero = config.get("zero_optimization", {})
    if zero.get("stage") != 3:
        return config_text
    zero["stage3_param_persistence_threshold"] = 0
    return json.dumps(config, indent=2) + "\n"


def copy_folder(source: Path, destination: Path) -> Path:
    """Copy a script's folder: small files copied, large ones linked, caches and VCS skipped, and
    the work folder itself when it lies inside (`--keep` a folder beside the script)."""
    work = destination.resolve().parent
    for current, folders, files in os.walk(source):
        folders[:] = [f for f in folders if f not in SKIPPED_FOLDERS and (Path(current) / f).resolve() != work]
        target = destination / os.path.relpath(current, source)
        target.mkdir(parents=True, exist_ok=True)
        for file in files:
            path = Path(current) / file
            if path.is_symlink() or path.stat().st_size > COPY_LIMIT:
                (target / file).symlink_to(path.resolve())
            else:
                shutil.copy2(path, target / file)
    return destination


def environment(options: VerifyOptions, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    # the runs start in the copy: the caller's relative PYTHONPATH entries would point elsewhere
    inherited = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(folder), *inherited])
    if not options.gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["DS_ACCELERATOR"] = "cpu"
    return env


def runner_arguments(script: Path, record: Path, options: VerifyOptions, batch_scale: int = 1) -> list[str]:
    arguments = ["--record", str(record), "--root", str(script.parent), "--steps", str(options.steps),
                 "--timeout", str(options.timeout)]
    if options.fake_data:
        arguments.append("--fake-data")
    if options.compare:
        arguments += ["--compare-batch-scale", str(batch_scale)]
    return [*arguments, str(script), *options.script_args]


def launch_original(script: Path, record: Path, options: VerifyOptions) -> Launch:
    command = [sys.executable, "-m", "migrate.verify.runner", *runner_arguments(script, record, options, options.nproc)]
    return run(command, script.parent, record, options)


def launch_converted(script: Path, record: Path, options: VerifyOptions) -> Launch:
    """The converted script under its target's own launcher (see Target.launcher)."""
    from migrate.targets import targets

    runner = runner_arguments(script, record, options)
    launcher = targets()[options.target].launcher
    if launcher == "deepspeed":
        port = free_port()
        command = [str(Path(sys.executable).parent / "deepspeed"), "--num_gpus", str(options.nproc),
                   "--master_port", str(port), "--module", "migrate.verify.runner", *runner]
        try:
            return run(command, script.parent, record, options)
        finally:
            remove_deepspeed_buffers(port)
    if launcher == "horovodrun":
        bin_folder = Path(sys.executable).parent
        command = [str(bin_folder / "horovodrun"), "-np", str(options.nproc), "-H", f"localhost:{options.nproc}",
                   sys.executable, "-m", "migrate.verify.runner", *runner]
        return run(command, script.parent, record, options)
    if launcher != "torchrun":
        raise InputError(str(script), 0, 0, f"verify cannot launch to-{options.target}'s scripts ({launcher or 'one process'})")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={options.nproc}",
               "--module", "migrate.verify.runner", *runner]
    return run(command, script.parent, record, options)


def remove_deepspeed_buffers(port: int | str) -> None:
    """DeepSpeed's CPU all-reduce op leaves its shared-memory buffers (2 x 66 MB per rank pair,
    named after the master port) in /dev/shm even when the script ends normally: remove them, or
    repeated runs fill shared memory."""
    for buffer in Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_*_{port}_*"):
        buffer.unlink(missing_ok=True)


def run(command: list[str], cwd: Path, record: Path, options: VerifyOptions) -> Launch:
    """Run a launch in its own process group; past the timeout (plus time to start), kill it whole."""
    record.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(command, cwd=cwd, env=environment(options, cwd), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    timed_out = False
    try:
        output, _ = process.communicate(timeout=options.timeout + 60)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
    return Launch(process.returncode, output[-20000:], read_records(record), timed_out, str(record))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


__all__ = ["InputError", "Launch", "VerifyOptions", "verify"]
