"""A real one-node SLURM cluster for a test: slurmctld and slurmd from Debian's slurm-wlm, started
as root with a slurm.conf in a temporary folder (auth/none, so munge is not needed), stopped by PID
afterwards, with every job cancelled first (a running job outlives slurmd).

scripts/bootstrap installs slurm-wlm where it can (root with apt-get). Without it the tests that
need the cluster skip, except under CI, where they fail: a proof that silently skips is no proof.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DAEMONS = ("slurmctld", "slurmd")
BINARIES = ("sbatch", "scontrol", "scancel", "sinfo", *DAEMONS)


def require_slurm() -> None:
    """Skip (fail under CI) where a cluster cannot be started here."""
    missing = [name for name in BINARIES if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]
    reason = None
    if missing:
        reason = f"slurm-wlm is not installed ({', '.join(missing)} missing): scripts/bootstrap test installs it"
    elif os.geteuid() != 0:
        reason = "slurmd must run as root to start jobs"
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _config(folder: Path, cpus: int) -> str:
    node = socket.gethostname().split(".")[0]
    return "\n".join([
        "ClusterName=migratetest",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "AuthType=auth/none",
        "CredType=cred/none",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerParameters=batch_sched_delay=0",
        "MinJobAge=5",
        "EnforcePartLimits=ALL",
        "ReturnToService=2",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
        f"PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


@contextlib.contextmanager
def one_node_cluster(folder: Path, cpus: int = 2) -> Iterator[dict[str, str]]:
    """Start the cluster; yield the environment its commands need (SLURM_CONF); stop it."""
    require_slurm()
    for name in ("state", "spool"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    conf = folder / "slurm.conf"
    conf.write_text(_config(folder, cpus))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(["slurmctld", "-i"], env=env, check=True, timeout=30)
        subprocess.run(["slurmd"], env=env, check=True, timeout=30)
        _wait_idle(env, folder)
        yield env
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True, timeout=30)
        for daemon in DAEMONS:
            _stop(folder / f"{daemon}.pid")


def _wait_idle(env: dict[str, str], folder: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=30)
        if state.stdout.strip() == "idle":
            return
        time.sleep(0.3)
    logs = "".join((folder / name).read_text()[-2000:] for name in ("slurmctld.log", "slurmd.log")
                   if (folder / name).exists())
    raise AssertionError(f"the test cluster's node never became idle:\n{logs}")


def _stop(pid_file: Path, timeout_s: float = 10) -> None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
