"""Launchers: what starts a converted script, on one node, on several, or under a scheduler.

`migrate launch TARGET SCRIPT` renders one without touching the script, and every `to-<target>`
renders its launcher through the same `render` (a one-node `LaunchPlan`, or the hosts --hosts
names; the plan and the names it gives live in migrate.launch_plan, below this module and
migrate.kubernetes, and are re-exported here). Everything that differs between launchers comes
from the plan's `Launcher` (migrate.launchers: its schedulers, how it reaches several nodes, its
hostfile rules, `--no_local_rank`); this module never asks which target a plan is for.
`problems` says, option by option, what a plan asks that its launcher cannot do. Shell scripts come from templates/launch/ (every path and
argument quoted by jinja2's `shquote`; what stands inside double quotes, a host name or the job id,
is checked or cleaned to letters, digits and `._:-` first); the Kubernetes manifest is a dict
written by PyYAML, so it parses. Every check matches the whole value (`fullmatch`: a `$` anchor
lets a trailing newline through); script arguments may hold anything but a NUL or an undecodable
byte. A --hostfile is read as a script is (migrate.sources.read_regular_file): a FIFO or a device is
refused before it is opened, and its size is capped.

What a job asks of its nodes: GPUs, one per process unless told (`gpus_per_node`); CPUs, under
SLURM each node whole (`#SBATCH --exclusive`) unless --cpus-per-node gives a count, under
Kubernetes a stated number per process (migrate.options.POD_*) unless --cpus-per-node and
--memory-per-node give them; never one CPU per process, which starves the DataLoader workers.
"""

from __future__ import annotations

import dataclasses
import os
import re

from migrate.launch_plan import (  # the plan and its names, re-exported: `from migrate.launch import LaunchPlan`
    LaunchPlan,
    default_out,
    gpus_per_node,
    header_lines,
    job_name,
    not_an_option,
    out_path,
    remake_command,
    script_as_given,
)
from migrate.launchers import LAUNCHERS, SCHEDULER_NAMES, Launcher
from migrate.records import Artifact, InputError
from migrate.options import MAX_PROCESSES, OptionProblem, host_slots, hosts_problems, memory_problems, nproc_problems
from migrate.sources import printable, read_regular_file, unsafe_name_reason
from migrate.templating import render as render_template

RDZV_BACKENDS = ("c10d", "static")
SLURM_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:,-]{0,63}")  # a partition name, a time limit
IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")
MASTER_ADDR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}")
HOSTFILE_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s+slots=([1-9][0-9]{0,3})")
MAX_HOSTFILE_BYTES = 1024 * 1024  # 4096 hosts of 253 characters fit


# ---------------------------------------------------------------------------------------------
# checks


def problems(plan: LaunchPlan) -> list[OptionProblem]:
    """Everything a plan asks that its launcher cannot do, as the command line names the options."""
    schedulers = plan.launcher.schedulers
    if plan.scheduler not in schedulers:
        if plan.scheduler not in SCHEDULER_NAMES:
            return [OptionProblem("--scheduler", f"{plan.scheduler!r}: choose {', '.join(SCHEDULER_NAMES[:-1])} "
                                  f"or {SCHEDULER_NAMES[-1]}")]
        return [OptionProblem("--scheduler", f"{plan.target} has no {plan.scheduler} launcher (choose "
                              f"{' or '.join(schedulers)}); `migrate launch --list` shows every one")]
    found = _name_problems(plan) + _argument_problems(plan) + _nproc_problems(plan) + _node_problems(plan)
    found += _address_problems(plan) + _host_problems(plan) + _scheduler_problems(plan) + _local_rank_problems(plan)
    return found


def _local_rank_problems(plan: LaunchPlan) -> list[OptionProblem]:
    """--no-local-rank is for a launcher that passes the script --local_rank unless told not to
    (Launcher.no_local_rank: deepspeed); torchrun (also under SLURM) and horovodrun pass none."""
    if plan.no_local_rank and (not plan.launcher.no_local_rank or plan.scheduler != "none"):
        said = " or ".join(launcher.name for launcher in LAUNCHERS if launcher.no_local_rank)
        return [OptionProblem("--no-local-rank", f"is for the {said} launcher (--scheduler none): the others "
                              "pass no --local_rank to the script")]
    return []


def _name_problems(plan: LaunchPlan) -> list[OptionProblem]:
    """Names written into a shell line or a comment: no control characters (a newline starts a command);
    --out a file name that is neither a folder nor the hostfile the launcher reads."""
    found = []
    for flag, value in (("SCRIPT", plan.script), ("--out", plan.out), ("--hostfile", plan.hostfile)):
        reason = unsafe_name_reason(value) if value is not None else None
        if value == "":
            reason = "is empty"
        if reason is not None:
            found.append(OptionProblem(flag, f"{quoted(value or '')}: the name {reason}; rename it"))
    if plan.out and plan.out.endswith(("/", os.sep)):
        found.append(OptionProblem("--out", f"{printable(plan.out)!r} names a folder: give a file name, e.g. "
                                   f"{printable(os.path.join(plan.out, os.path.basename(default_out(plan))))}"))
    elif plan.out and plan.hostfile and os.path.realpath(plan.out) == os.path.realpath(plan.hostfile):
        found.append(OptionProblem("--out", "is the hostfile the launcher reads: give another file name"))
    return found


def quoted(value: str, limit: int = 60) -> str:
    """A value in a message: Python's quoted form, escaped to ASCII where it holds what a terminal
    should not be sent (a control character, an undecodable byte)."""
    value = value[:limit]
    return repr(value) if unsafe_name_reason(value) is None else ascii(value)


def _argument_problems(plan: LaunchPlan) -> list[OptionProblem]:
    """Script arguments are quoted, so any character arrives as given, except two no launcher can hold:
    a NUL (no command line carries one) and bytes that are not UTF-8 (the launcher is UTF-8 text)."""
    for argument in plan.script_args:
        if "\0" in argument:
            return [OptionProblem("SCRIPT_ARGS", f"{quoted(argument)}: holds a NUL character, which no command "
                                  "line can carry")]
        if any("\ud800" <= char <= "\udfff" for char in argument):  # how Python holds an undecodable byte
            return [OptionProblem("SCRIPT_ARGS", f"{quoted(argument)}: is not valid UTF-8; the launcher is a "
                                  "UTF-8 text file")]
    return []


def _nproc_problems(plan: LaunchPlan) -> list[OptionProblem]:
    found = nproc_problems(plan.nproc_per_node)
    if not found and not plan.nproc_per_node.isdigit() and plan.scheduler != "none":
        found.append(OptionProblem("--nproc-per-node", f"{plan.scheduler} needs a number: the job requests the GPUs "
                                   "(or CPUs) its processes use. Example: --nproc-per-node 8"))
    return found


def _node_problems(plan: LaunchPlan) -> list[OptionProblem]:
    if not 1 <= plan.nnodes <= MAX_PROCESSES:
        return [OptionProblem("--nnodes", f"{plan.nnodes}: give a number from 1 to {MAX_PROCESSES}")]
    if plan.rdzv_backend not in RDZV_BACKENDS:
        return [OptionProblem("--rdzv-backend", f"{plan.rdzv_backend!r}: choose c10d (node ranks are given at the "
                              "rendezvous) or static (each node is given its NODE_RANK)")]
    if plan.rdzv_backend != "c10d" and (plan.launcher.by_hosts or plan.scheduler != "none"):
        return [OptionProblem("--rdzv-backend", "only torchrun started by hand on each node (--scheduler none) "
                              "takes a rendezvous backend")]
    if plan.rdzv_backend != "c10d" and plan.nnodes == 1:
        return [OptionProblem("--rdzv-backend", "is for several nodes (--nnodes 2 or more); one node "
                              "rendezvouses on this machine")]
    return []


def _address_problems(plan: LaunchPlan) -> list[OptionProblem]:
    """--master-addr is read only by torchrun on several nodes started by hand; --master-port by
    torchrun and the deepspeed launcher, outside Kubernetes (the operator chooses it there)."""
    found: list[OptionProblem] = []
    if plan.master_port is not None:
        if not 1 <= plan.master_port <= 65535:
            found.append(OptionProblem("--master-port", f"{plan.master_port}: give a port from 1 to 65535"))
        elif plan.launcher.picks_ports:
            found.append(OptionProblem("--master-port", f"{plan.launcher.name} chooses its own rendezvous ports"))
        elif plan.scheduler == "kubernetes":
            found.append(OptionProblem("--master-port", "the training operator gives each pod the Master's port"))
    if plan.master_addr is None:
        return found
    if not MASTER_ADDR.fullmatch(plan.master_addr):
        reason = f"{plan.master_addr[:60]!r}: give a host name or an IP address (letters, digits, . _ - :)"
    elif plan.scheduler != "none":
        reason = f"under {plan.scheduler} the first node of the job is the master; it is not chosen here"
    elif plan.hosts or plan.hostfile or plan.launcher.by_hosts:
        reason = "the first host of --hosts / --hostfile is the master" if plan.hosts or plan.hostfile else \
            f"{plan.launcher.name} on several nodes takes --hosts or --hostfile; the first host is the master"
    elif plan.nnodes == 1:
        reason = "is for several nodes (--nnodes 2 or more); one node rendezvouses on this machine"
    else:
        return found
    return [*found, OptionProblem("--master-addr", reason)]


def _host_problems(plan: LaunchPlan) -> list[OptionProblem]:
    if not (plan.hosts or plan.hostfile):
        if plan.launcher.by_hosts and plan.nnodes > 1 and plan.scheduler == "none":
            return [OptionProblem("--nnodes", f"{plan.launcher.name} reaches the other nodes through a host "
                                  "list: give --hosts node1:8,node2:8 or --hostfile PATH instead")]
        return []
    flag = "--hosts" if plan.hosts else "--hostfile"
    if plan.hosts and plan.hostfile:
        return [OptionProblem("--hosts/--hostfile", "give one of them")]
    if not plan.launcher.by_hosts:
        return [OptionProblem(flag, f"{plan.launcher.name} does not read a host list: give --nnodes and "
                              "--master-addr, and run the launcher on each node")]
    if plan.scheduler != "none":
        return [OptionProblem(flag, f"{plan.scheduler} allocates the nodes: give --nnodes")]
    found = hosts_problems(plan.hosts) + _pdsh_problems(plan)
    count = len(plan.hosts)
    if plan.hostfile:
        try:
            count = len(read_hostfile(plan.hostfile, plan.launcher))
        except InputError as error:
            return [OptionProblem("--hostfile", str(error))]
    if plan.nnodes not in (1, count):
        found.append(OptionProblem(f"--nnodes/{flag}", f"--nnodes {plan.nnodes} but {count} hosts: the hosts "
                                   "are the nodes (leave --nnodes out)"))
    if plan.nproc_per_node != "auto":
        found.append(OptionProblem(f"--nproc-per-node/{flag}", "the host list gives each host's process count "
                                   "(host:N, or slots=N in a hostfile)"))
    return found


PLAIN_WORD = re.compile(r"[A-Za-z0-9._/+=:,@%-]+")


def _pdsh_problems(plan: LaunchPlan) -> list[OptionProblem]:
    """A launcher that hands a multi-node command to pdsh (Launcher.joins_remote_command: deepspeed),
    which joins its words with spaces into a remote shell line (quoting only words with spaces): only
    plain words arrive as given."""
    if not plan.launcher.joins_remote_command:
        return []
    script = os.path.relpath(plan.script, os.path.dirname(out_path(plan)) or ".")
    odd = [word for word in (script, *plan.script_args) if not PLAIN_WORD.fullmatch(word)]
    if not odd:
        return []
    return [OptionProblem("SCRIPT" if odd[0] == script else "SCRIPT_ARGS",
                          f"{quoted(odd[0])}: the {plan.launcher.name} launcher's pdsh joins the command into a remote "
                          "shell line unquoted, so only plain words (letters, digits, . _ / + = : , @ % -) arrive "
                          "as given: rename it, or launch several nodes with --scheduler slurm")]


def _scheduler_problems(plan: LaunchPlan) -> list[OptionProblem]:
    found: list[OptionProblem] = []
    if plan.scheduler != "slurm":
        for flag, value in (("--partition", plan.partition), ("--time", plan.time)):
            if value is not None:
                found.append(OptionProblem(flag, "is a SLURM option: add --scheduler slurm"))
    for flag, value in (("--partition", plan.partition), ("--time", plan.time)):
        if value is not None and not SLURM_VALUE.fullmatch(value):
            found.append(OptionProblem(flag, f"{value[:40]!r}: letters, digits and . _ : , - only"))
    return found + _resource_problems(plan) + _image_problems(plan)


def _resource_problems(plan: LaunchPlan) -> list[OptionProblem]:
    """What a job requests per node: CPUs and GPUs under SLURM or Kubernetes, memory under Kubernetes."""
    found: list[OptionProblem] = []
    for flag, value, least in (("--cpus-per-node", plan.cpus_per_node, 1), ("--gpus-per-node", plan.gpus_per_node, 0)):
        if value is None:
            continue
        if plan.scheduler == "none":
            found.append(OptionProblem(flag, "is what a SLURM or Kubernetes job requests: add --scheduler slurm or "
                                       "--scheduler kubernetes"))
        elif not least <= value <= MAX_PROCESSES:
            found.append(OptionProblem(flag, f"{value}: from {'0 (a CPU job)' if least == 0 else least} to {MAX_PROCESSES}"))
    if plan.memory_per_node is not None:
        if plan.scheduler != "kubernetes":
            found.append(OptionProblem("--memory-per-node", "is what a Kubernetes pod requests: add --scheduler "
                                       "kubernetes"))
        else:
            found += memory_problems(plan.memory_per_node)
    return found


def _image_problems(plan: LaunchPlan) -> list[OptionProblem]:
    found: list[OptionProblem] = []
    if plan.scheduler == "kubernetes":
        if plan.image is None:
            found.append(OptionProblem("--image", "Kubernetes runs the script from a container image: name the "
                                       "one that holds it. Example: --image registry.example.com/team/train:1.0"))
        elif not IMAGE.fullmatch(plan.image):
            found.append(OptionProblem("--image", f"{plan.image[:60]!r}: not an image reference"))
    elif plan.image is not None:
        found.append(OptionProblem("--image", "is a Kubernetes option: add --scheduler kubernetes"))
    return found


def read_hostfile(path: str, launcher: Launcher) -> list[tuple[str, int]]:
    """`HOST slots=N` lines, the format DeepSpeed and horovodrun share, as strict as the launcher that
    reads it (Launcher.hostfile_comments): DeepSpeed skips blank lines and `#` comments, horovodrun
    reads every line as a host."""
    lines = _hostfile_text(path).splitlines()
    hosts: list[tuple[str, int]] = []
    comments = launcher.hostfile_comments
    for number, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip() if comments else line.strip()
        if comments and not text:
            continue
        match = HOSTFILE_LINE.fullmatch(text)
        if match is None:
            col = len(line) - len(line.lstrip()) + 1
            said = "a blank line" if not text else repr(text[:60])
            rule = "" if comments else f"; {launcher.name} reads every line as a host: no blank lines or comments"
            raise InputError(path, number, col, f"{said}: write `HOST slots=N`{rule}")
        if any(match.group(1) == host for host, _slots in hosts):
            raise InputError(path, number, 1, f"{match.group(1)} is named twice; give each host once")
        hosts.append((match.group(1), int(match.group(2))))
    if not hosts:
        raise InputError(path, 0, 0, "names no host (lines of `HOST slots=N`)")
    return hosts


def _hostfile_text(path: str) -> str:
    """The hostfile's text, read as a script is (migrate.sources.read_regular_file): a FIFO or a
    device is refused before it is opened (reading one could block forever, or never end), and
    the size is capped."""
    said = printable(path)
    raw = _hostfile_bytes(path, said)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        col = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise InputError(said, line, col, f"not valid UTF-8 (byte 0x{raw[error.start]:02x})") from None


def _hostfile_bytes(path: str, said: str) -> bytes:
    reason = unsafe_name_reason(path)  # a NUL is no path at all
    if reason is not None:
        raise InputError(said, 0, 0, f"the file name {reason}; rename it")
    if os.path.isdir(path):
        raise InputError(said, 0, 0, "is a folder: give the hostfile (lines of `HOST slots=N`)")
    try:
        too_large = os.stat(path).st_size > MAX_HOSTFILE_BYTES
    except OSError:
        too_large = False  # read_regular_file says why it cannot be read
    if too_large:
        raise InputError(said, 0, 0, f"is larger than {MAX_HOSTFILE_BYTES // 1024} KiB; not a hostfile")
    try:
        return read_regular_file(path, MAX_HOSTFILE_BYTES)
    except InputError as error:
        raise InputError(said, error.line, error.col, error.message) from None


# ---------------------------------------------------------------------------------------------
# rendering


def render(plan: LaunchPlan) -> list[Artifact]:
    """The launcher a plan describes, and the hostfile --hosts asks for (Launcher.hostfile_for_hosts)."""
    if plan.nproc_per_node.isdigit():  # 010 is 10 to torchrun, but 8 to bash arithmetic
        plan = dataclasses.replace(plan, nproc_per_node=str(int(plan.nproc_per_node)))
    out = out_path(plan)
    if plan.scheduler == "kubernetes":
        from migrate.kubernetes import pytorchjob_manifest  # PyYAML, only for a manifest

        return [Artifact(path=out, text=pytorchjob_manifest(plan))]
    artifacts: list[Artifact] = []
    values = _shell_values(plan, out)
    if plan.launcher.hostfile_for_hosts and plan.hosts and plan.scheduler == "none":
        hostfile = os.path.join(os.path.dirname(out), "hostfile")
        artifacts.append(Artifact(path=hostfile, text=render_template("deepspeed/hostfile.j2",
                                                                    hosts=host_slots(plan.hosts))))
        values.update(hostfile="hostfile", hostfile_said="hostfile")
    template = "launch/slurm.sh.j2" if plan.scheduler == "slurm" else f"launch/{plan.launcher.name}.sh.j2"
    artifacts.append(Artifact(path=out, text=render_template(template, **values), executable=True))
    return artifacts


def _shell_values(plan: LaunchPlan, out: str) -> dict[str, object]:
    """What the shell templates read: the script relative to the launcher, counts, the header."""
    folder = os.path.dirname(out) or "."
    script = not_an_option(os.path.relpath(plan.script, folder))
    numeric = plan.nproc_per_node.isdigit()
    hosts = host_slots(plan.hosts) if plan.hosts else read_hostfile(plan.hostfile, plan.launcher) if plan.hostfile else []
    hostfile = os.path.relpath(plan.hostfile, folder) if plan.hostfile else None
    return {
        "header": header_lines(plan),
        "target": plan.target,
        "launcher": plan.launcher.name,
        "script": script,
        "script_said": printable(script),
        "hostfile_said": printable(hostfile or ""),
        "script_args": plan.script_args,
        "nnodes": plan.nnodes,
        "nproc": plan.nproc_per_node,
        "processes": processes_said(plan.nproc_per_node),
        "master_addr": plan.master_addr,
        "master_port": plan.master_port,
        "rdzv_backend": plan.rdzv_backend,
        "rdzv_id": job_name(plan),
        "hosts": ",".join(f"{host}:{slots}" for host, slots in hosts) if plan.hosts else "",
        "total": sum(slots for _host, slots in hosts) or (int(plan.nproc_per_node) * plan.nnodes if numeric else 0),
        "hostfile": hostfile,
        "first_host": hosts[0][0] if hosts else "",
        "num_nodes": len(hosts),
        "partition": plan.partition,
        "time": plan.time,
        "gpus_per_node": gpus_per_node(plan),
        "cpus_per_node": plan.cpus_per_node,  # None: each node whole (SLURM's --exclusive)
        "job_name": job_name(plan),
        "launcher_name": os.path.basename(out),
        "no_local_rank": plan.no_local_rank,
    }


def processes_said(nproc: str) -> str:
    """What torchrun starts for --nproc-per-node, said as it is (for `auto`: GPUs, else CPU cores)."""
    if nproc == "auto":
        return "one process per GPU (torchrun's `auto`: one per CPU core on a host without GPUs)"
    if nproc == "gpu":
        return "one process per GPU"
    return "1 process per node" if nproc == "1" else f"{nproc} processes per node"
