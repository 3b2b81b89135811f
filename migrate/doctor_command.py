"""`migrate doctor`: the environment before a launch (migrate.doctor does the checks). The options
are checked first (a bad one is a usage error, exit 2, naming the option); then every check runs
and the report goes to stdout, as text or one JSON document; the exit status is 1 when a check
failed, else 0. Nothing is changed: no file of the user's is written.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
BACKENDS = ("gloo", "nccl")
REPORTS = ("text", "json")
MAX_TIMEOUT = 86400  # a day

Nproc = Annotated[int, typer.Option("--nproc", metavar="N", help="Local processes the probe launches through "
                                    "torchrun (with nccl: at most one per visible GPU).")]
Backend = Annotated[Optional[str], typer.Option("--backend", metavar="gloo|nccl", show_default=False,
                    help="The process group backend to check (default: nccl when torch can use CUDA, else gloo).")]
Report = Annotated[str, typer.Option("--report", metavar="text|json", help="text: a line a check; json: one "
                                     "document {backend, nproc, failed, warnings, checks: [{name, status, detail}]}.")]
Timeout = Annotated[float, typer.Option("--timeout", metavar="S", help="Seconds the probe may take, torch's start "
                                        "included; past them it is a hang: reported as failed, with the step each "
                                        "process had reached, and every process it started is stopped.")]
Probe = Annotated[bool, typer.Option("--probe/--no-probe", help="Launch the processes (--no-probe: only read the "
                                     "environment, in a second or two).")]


def doctor(nproc: Nproc = 2, backend: Backend = None, report: Report = "text", timeout: Timeout = 120.0,
           probe: Probe = True) -> None:
    """Check the environment before a launch; change nothing.

    Reports torch, CUDA and NCCL versions and the visible GPUs; the launcher variables that are set
    (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, NCCL_*, ...) and those that contradict
    each other (RANK=3 with WORLD_SIZE=2, WORLD_SIZE without MASTER_ADDR, an NCCL_SOCKET_IFNAME that
    names no interface of this host); whether MASTER_ADDR resolves and MASTER_PORT is free here;
    /dev/shm's size (under 1 GiB: a warning, docker's default is 64 MiB) and the open-file limit.
    Then it launches N local processes through torchrun that start a process group, check the sum
    of an all-reduce of a known tensor, pass a barrier and time all-reduces of a large tensor: the
    bus bandwidth printed is nccl-tests' busbw (algbw x 2(n-1)/n).

    Each check says ok, warning or failed, and one line of why and what to do. Exit status: 0 when
    nothing failed, 1 when a check failed, 2 for bad options.

    \b
    Example:
      migrate doctor                          # gloo or nccl, as this machine allows, 2 processes
      migrate doctor --backend nccl --nproc 8
      MASTER_ADDR=node1 MASTER_PORT=29400 migrate doctor --no-probe --report json
    """
    from migrate import doctor as checks

    _check_options(nproc, backend, report, timeout)
    options = checks.DoctorOptions(nproc=nproc, backend=backend, timeout=timeout, probe=probe)
    machine = checks.read_machine(dict(os.environ))
    found = checks.diagnose(machine, options)
    if report == "json":
        sys.stdout.write(checks.render_json(found, checks.chosen_backend(options, machine.torch), nproc))
    else:
        sys.stdout.write(checks.render_text(found))
    raise typer.Exit(checks.exit_status(found))


def _check_options(nproc: int, backend: str | None, report: str, timeout: float) -> None:
    """A usage error (exit 2) naming the first bad option."""
    if nproc < 1:
        raise typer.BadParameter(f"{nproc}: give 1 or more processes", param_hint="--nproc")
    if backend is not None and backend not in BACKENDS:
        raise typer.BadParameter(f"{backend!r}: choose gloo or nccl", param_hint="--backend")
    if report not in REPORTS:
        raise typer.BadParameter(f"{report!r}: choose text or json", param_hint="--report")
    if not 0 < timeout <= MAX_TIMEOUT:
        raise typer.BadParameter(f"{timeout:g}: give a number of seconds above 0, at most {MAX_TIMEOUT}",
                                 param_hint="--timeout")
