"""`migrate doctor`: the environment before a launch, checked and reported. It changes nothing: it
reads, binds a port and lets it go, and launches a few local processes that end before it returns.

Each check is a `Check(name, status, detail)`: status "ok", "warning" or "failed", detail one line
of what was found, why it matters and what to do. The checks are small functions over the facts
`read_machine` gathers (a `Machine`: torch's facts, the environment, /dev/shm, the open-file
limit, the network interfaces, a resolver), so tests give them made-up facts. In order:

- torch: its version (failed: not importable). cuda: whether torch can use CUDA, its version.
  nccl: NCCL's version (`torch.cuda.nccl.version()`, with CUDA). gpus: the visible GPUs (count,
  names, memory) and CUDA_VISIBLE_DEVICES. backend: --backend against the machine (nccl needs CUDA
  and a GPU per process; the default is nccl with CUDA, else gloo).
- launcher variables: the MASTER_*, RANK, WORLD_SIZE, LOCAL_*, NODE_RANK, NCCL_*, TORCH_NCCL_*,
  GLOO_* and TORCH_DISTRIBUTED_* variables that are set. rank variables: those that contradict each
  other (RANK >= WORLD_SIZE, LOCAL_RANK without RANK, a value that is not a number, ...).
- MASTER_ADDR: whether it resolves (WORLD_SIZE without it: failed, env:// needs it). MASTER_PORT:
  whether it is free on this host (bound with SO_REUSEADDR, as torch's store binds, then
  released); unset, torchrun's default 29500 is checked. socket interfaces: whether
  NCCL_SOCKET_IFNAME (NCCL's syntax: `^` excludes, `=` matches exactly, else prefixes) and
  GLOO_SOCKET_IFNAME (exact names) name interfaces of this host.
- /dev/shm: under 1 GiB (size or free) a warning: NCCL's shared-memory transport, DeepSpeed's CPU
  all-reduce (2 x 66 MB per rank pair) and DataLoader workers' batches live there, and docker's
  default of 64 MiB runs out ("Bus error", NCCL's "unable to allocate shared memory").
  MIGRATE_DOCTOR_SHM_BYTES, when set, replaces the size and free space read (for tests).
- open files: RLIMIT_NOFILE's soft limit under 4096 is a warning: every rank holds sockets to the
  others and DataLoader workers pass tensors as file descriptors; 1024, a common default, runs out.
- probe: `python -m torch.distributed.run --standalone --nproc-per-node N -m migrate.doctor_probe`
  in a temporary folder: each process inits the process group, all-reduces a known tensor (the
  sum is checked), passes a barrier and times all-reduces of a large tensor (16 MiB with gloo,
  256 MiB with nccl). Bandwidths are nccl-tests': algbw = bytes / time, busbw = algbw x 2(n-1)/n
  (GB/s, 1e9 bytes). Past --timeout seconds it is a hang: failed, with the step each rank had
  reached; every process it started is stopped (they carry a tag, see migrate.verify.processes).

`--report json` prints one document: {"backend": "gloo", "nproc": 2, "failed": 0, "warnings": 1,
"checks": [{"name": "torch", "status": "ok", "detail": "..."}, ...]}. The exit status is 0 when
no check failed, 1 when one did (2, bad options, is the command's).
"""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

OK, WARNING, FAILED = "ok", "warning", "failed"
GIB = 1 << 30
MIB = 1 << 20
SHM_MINIMUM = GIB  # /dev/shm below this (size or free) is a warning
SHM_OVERRIDE = "MIGRATE_DOCTOR_SHM_BYTES"  # tests fake /dev/shm's size (and free space) with it
NOFILE_MINIMUM = 4096
TORCHRUN_PORT = 29500  # torchrun's MASTER_PORT when none is given
RESOLVE_LIMIT = 5.0  # seconds a name lookup may take
STOP_GRACE = 3.0  # seconds between SIGTERM and SIGKILL when the probe is stopped
RANK_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK")
LAUNCHER_NAMES = ("MASTER_ADDR", "MASTER_PORT", *RANK_NAMES, "TORCHELASTIC_RUN_ID")
LAUNCHER_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "TORCH_DISTRIBUTED_")
PROBE_SIZES = {"gloo": (16 * MIB, 5), "nccl": (256 * MIB, 20)}  # bytes all-reduced, timed repetitions
STEPS = ("start", "init", "all_reduce", "barrier", "bandwidth", "done")  # what the probe records, in order


@dataclass(frozen=True)
class Check:
    """One verdict: `status` is OK, WARNING or FAILED; `detail` one line of why and what to do."""

    name: str
    status: str
    detail: str


@dataclass(frozen=True)
class Gpu:
    name: str
    memory: int  # bytes


@dataclass(frozen=True)
class TorchFacts:
    """What torch says about this machine; `version` None when torch cannot be imported (`error`)."""

    version: str | None
    error: str = ""
    cuda_built: str | None = None  # torch.version.cuda: None for a CPU build
    cuda_available: bool = False
    nccl: str | None = None  # NCCL's version, with CUDA
    nccl_error: str = ""
    gpus: tuple[Gpu, ...] = ()
    distributed: bool = True
    gloo: bool = True
    nccl_backend: bool = False


@dataclass(frozen=True)
class Machine:
    """Everything the checks read, gathered once (`read_machine`) or made up by a test."""

    torch: TorchFacts
    env: Mapping[str, str]
    shm: tuple[int, int] | str  # (size, free) in bytes, or why it could not be read
    nofile: tuple[int, int] | None  # RLIMIT_NOFILE (soft, hard); None where unknown
    interfaces: tuple[str, ...]
    resolve: Callable[[str], list[str]]  # a host's addresses; raises OSError


@dataclass(frozen=True)
class DoctorOptions:
    nproc: int = 2
    backend: str | None = None  # None: nccl when torch can use CUDA, else gloo
    timeout: float = 120.0
    probe: bool = True


@dataclass(frozen=True)
class ProbeRun:
    """How a probe launch ended: `records` each rank's recorded steps; `timed_out` when stopped."""

    returncode: int | None
    timed_out: bool
    seconds: float
    records: dict[int, list[dict[str, object]]] = field(default_factory=dict)
    output: str = ""


# ---------------------------------------------------------------- reading the machine

def read_machine(env: Mapping[str, str]) -> Machine:
    return Machine(torch=read_torch(), env=env, shm=read_shm(env), nofile=read_nofile(),
                   interfaces=read_interfaces(), resolve=resolve)


def read_torch() -> TorchFacts:
    """torch's version, CUDA, NCCL and GPUs (importing torch: a few seconds)."""
    try:
        import torch
        import torch.distributed as dist
    except Exception as error:  # noqa: BLE001 - a broken install raises anything
        return TorchFacts(version=None, error=f"{type(error).__name__}: {error}")
    available = bool(torch.cuda.is_available())
    nccl, nccl_error = (_nccl_version(torch) if available else (None, ""))
    gpus = tuple(Gpu(p.name, int(p.total_memory)) for p in
                 (torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count()))) if available else ()
    distributed = bool(dist.is_available())
    return TorchFacts(version=str(torch.__version__), cuda_built=torch.version.cuda, cuda_available=available,
                      nccl=nccl, nccl_error=nccl_error, gpus=gpus, distributed=distributed,
                      gloo=distributed and bool(dist.is_gloo_available()),
                      nccl_backend=distributed and bool(dist.is_nccl_available()))


def _nccl_version(torch: object) -> tuple[str | None, str]:
    try:
        version = torch.cuda.nccl.version()  # type: ignore[attr-defined]  # torch is handed in as an object: doctor never imports it at module level
    except Exception as error:  # noqa: BLE001
        return None, f"{type(error).__name__}: {error}"
    if isinstance(version, int):  # older torch: 2708 for 2.7.8
        version = (version // 1000, version % 1000 // 100, version % 100)
    numbers, suffix = version[:3], version[3:]  # (2, 27, 3) or (2, 27, 3, "suffix")
    said = ".".join(str(part) for part in numbers)
    return (f"{said} ({suffix[0]})" if suffix else said), ""


def read_shm(env: Mapping[str, str], path: str = "/dev/shm") -> tuple[int, int] | str:
    """/dev/shm's (size, free) in bytes, MIGRATE_DOCTOR_SHM_BYTES's value for both when set, or why not."""
    if SHM_OVERRIDE in env:
        value = env[SHM_OVERRIDE].strip()
        if not value.isdigit():
            return f"{SHM_OVERRIDE}={env[SHM_OVERRIDE]!r} is not a number of bytes"
        return int(value), int(value)
    try:
        stats = os.statvfs(path)
    except OSError as error:
        return f"{path}: {error.strerror}"
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


def read_nofile() -> tuple[int, int] | None:
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    return soft, hard


def read_interfaces() -> tuple[str, ...]:
    try:
        return tuple(name for _, name in socket.if_nameindex())
    except OSError:
        return ()


def resolve(host: str, limit: float = RESOLVE_LIMIT) -> list[str]:
    """The addresses `host` resolves to; OSError when it does not (TimeoutError after `limit` s)."""
    ips: list[list[str]] = []  # the answer, once the look-up has one
    errors: list[OSError] = []

    def look_up() -> None:
        try:
            ips.append(sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}))
        except OSError as error:
            errors.append(error)

    thread = threading.Thread(target=look_up, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {limit:g} s")
    if errors:
        raise errors[0]
    return ips[0]


# ---------------------------------------------------------------- the checks

def chosen_backend(options: DoctorOptions, facts: TorchFacts) -> str:
    return options.backend or ("nccl" if facts.cuda_available else "gloo")


def environment_checks(machine: Machine, options: DoctorOptions) -> list[Check]:
    """Every check but the probe, in the order the report prints them."""
    backend = chosen_backend(options, machine.torch)
    checks = [torch_check(machine.torch)]
    if machine.torch.version is not None:
        checks += [cuda_check(machine.torch), nccl_check(machine.torch, backend),
                   gpus_check(machine.torch, machine.env), backend_check(machine.torch, backend, options.nproc)]
    addresses = master_addresses(machine)
    checks += [launcher_check(machine.env), rank_check(machine.env), addresses[0],
               master_port_check(machine.env, addresses[1]),
               interfaces_check(machine.env, machine.interfaces, backend),
               shm_check(machine.shm), nofile_check(machine.nofile)]
    return checks


def torch_check(facts: TorchFacts) -> Check:
    if facts.version is None:
        return Check("torch", FAILED, f"cannot import torch ({facts.error}): install it in this environment "
                                      "(the one `python` here runs)")
    return Check("torch", OK, facts.version)


def cuda_check(facts: TorchFacts) -> Check:
    if facts.cuda_available:
        return Check("cuda", OK, f"available, CUDA {facts.cuda_built}")
    if facts.cuda_built is None:
        return Check("cuda", OK, f"not available: torch {facts.version} is a CPU build (gloo only)")
    return Check("cuda", WARNING, f"torch is built for CUDA {facts.cuda_built} but cannot use it: no GPU, a driver "
                                  "too old for it, or CUDA_VISIBLE_DEVICES hides them (`nvidia-smi` tells)")


def nccl_check(facts: TorchFacts, backend: str) -> Check:
    if not facts.cuda_available:
        return Check("nccl", OK, "not used: NCCL runs on GPUs, and none is usable here")
    if facts.nccl is None:
        status = FAILED if backend == "nccl" else WARNING
        return Check("nccl", status, f"torch.cuda.nccl.version() failed ({facts.nccl_error}): this torch has no "
                                     "working NCCL; install a CUDA build of torch")
    return Check("nccl", OK, f"NCCL {facts.nccl}")


def gpus_check(facts: TorchFacts, env: Mapping[str, str]) -> Check:
    visible = env.get("CUDA_VISIBLE_DEVICES")
    said = "CUDA_VISIBLE_DEVICES not set" if visible is None else f"CUDA_VISIBLE_DEVICES={visible!r}"
    if facts.gpus:
        names = ", ".join(f"{i}: {gpu.name} ({gpu.memory / GIB:.1f} GiB)" for i, gpu in enumerate(facts.gpus))
        return Check("gpus", OK, f"{len(facts.gpus)} visible ({names}); {said}")
    if visible is not None and facts.cuda_built is not None and visible.strip() in ("", "-1"):
        return Check("gpus", WARNING, f"none visible: {said} hides every GPU; unset it to use them")
    return Check("gpus", OK, f"none visible; {said}")


def backend_check(facts: TorchFacts, backend: str, nproc: int) -> Check:
    if not facts.distributed:
        return Check("backend", FAILED, "torch.distributed is not available in this torch build: install one with it")
    if backend == "gloo":
        if not facts.gloo:
            return Check("backend", FAILED, "gloo is not available in this torch build: use --backend nccl")
        return Check("backend", OK, f"gloo, {nproc} process(es) on the CPU")
    if not facts.cuda_available or not facts.nccl_backend:
        return Check("backend", FAILED, "--backend nccl needs CUDA and NCCL, and this torch has "
                                        f"{'no NCCL' if facts.cuda_available else 'no usable CUDA'}: "
                                        "use --backend gloo here, or run on a GPU node")
    if nproc > len(facts.gpus):
        return Check("backend", FAILED, f"--nproc {nproc} with {len(facts.gpus)} visible GPU(s): NCCL needs a GPU per "
                                        "process (two on one GPU stop with 'Duplicate GPU detected'); give "
                                        f"--nproc {len(facts.gpus)} or fewer")
    return Check("backend", OK, f"nccl, {nproc} process(es), one GPU each")


def launcher_check(env: Mapping[str, str]) -> Check:
    names = [name for name in LAUNCHER_NAMES if name in env]
    names += sorted(name for name in env if name.startswith(LAUNCHER_PREFIXES) and name not in names)
    if not names:
        return Check("launcher variables", OK, "none set (torchrun sets them for each process)")
    return Check("launcher variables", OK, " ".join(f"{name}={env[name]}" for name in names))


def rank_check(env: Mapping[str, str]) -> Check:
    """RANK, WORLD_SIZE, LOCAL_RANK, ... against each other: failed where env:// init cannot work,
    a warning for a leftover that half-describes a launch."""
    values, problems = _rank_values(env)
    if problems:
        return Check("rank variables", FAILED, "; ".join(problems))
    failed, warned = _rank_contradictions(values)
    if failed or warned:
        status = FAILED if failed else WARNING
        return Check("rank variables", status, "; ".join(failed + warned) + "; torchrun sets all of them for each "
                                                "process: unset the leftovers, or fix them for a launch by hand")
    if not values:
        return Check("rank variables", OK, "none set")
    return Check("rank variables", OK, "consistent: " + " ".join(f"{name}={value}" for name, value in values.items()))


def _rank_values(env: Mapping[str, str]) -> tuple[dict[str, int], list[str]]:
    values, problems = {}, []
    for name in RANK_NAMES:
        if name not in env:
            continue
        text = env[name].strip()
        if not text.isdigit() or (name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE") and int(text) == 0):
            least = 1 if name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE") else 0
            problems.append(f"{name}={env[name]!r} is not a whole number >= {least}")
        else:
            values[name] = int(text)
    return values, problems


def _rank_contradictions(values: dict[str, int]) -> tuple[list[str], list[str]]:
    failed, warned = [], []
    pairs = (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE"), ("LOCAL_RANK", "WORLD_SIZE"))
    for rank, size in pairs:
        if rank in values and size in values and values[rank] >= values[size]:
            failed.append(f"{rank}={values[rank]} with {size}={values[size]}: ranks run from 0 to {values[size] - 1}")
    if values.get("LOCAL_WORLD_SIZE", 0) > values.get("WORLD_SIZE", 1 << 62):
        failed.append(f"LOCAL_WORLD_SIZE={values['LOCAL_WORLD_SIZE']} is more than WORLD_SIZE={values['WORLD_SIZE']}")
    if "LOCAL_RANK" in values and "RANK" not in values:
        warned.append(f"LOCAL_RANK={values['LOCAL_RANK']} is set without RANK (a leftover of another launch? a script "
                      "that reads it believes it was launched)")
    for one, other in (("RANK", "WORLD_SIZE"), ("WORLD_SIZE", "RANK")):
        if one in values and other not in values:
            warned.append(f"{one} is set without {other}: init_process_group's env:// needs both")
    return failed, warned


def master_addresses(machine: Machine) -> tuple[Check, list[str] | None]:
    """The MASTER_ADDR check, and the addresses it resolves to (None: unset or not resolving)."""
    env = machine.env
    address = env.get("MASTER_ADDR")
    if address is None or not address.strip():
        if "WORLD_SIZE" in env:
            return Check("MASTER_ADDR", FAILED, "WORLD_SIZE is set but MASTER_ADDR is not: env:// init stops "
                                                "('MASTER_ADDR expected'); set it to the first node's address, or "
                                                "unset WORLD_SIZE"), None
        return Check("MASTER_ADDR", OK, "not set (torchrun --standalone and one-node launches use this host)"), None
    try:
        found = machine.resolve(address)
    except OSError as error:
        why = error.strerror or str(error)
        return Check("MASTER_ADDR", FAILED, f"{address!r} does not resolve ({why}): every rank connects to it; "
                                            "give the first node's IP address or a name every node resolves"), None
    return Check("MASTER_ADDR", OK, f"{address} resolves to {', '.join(found)}"), found


def master_port_check(env: Mapping[str, str], addresses: list[str] | None) -> Check:
    """Whether MASTER_PORT (unset: torchrun's 29500) is free here, when MASTER_ADDR is this host."""
    text = env.get("MASTER_PORT")
    if text is None:
        if "WORLD_SIZE" in env:
            return Check("MASTER_PORT", FAILED, "WORLD_SIZE is set but MASTER_PORT is not: env:// init stops "
                                                "('MASTER_PORT expected'); set it, e.g. 29500")
        busy = port_busy(TORCHRUN_PORT)
        if busy:
            return Check("MASTER_PORT", WARNING, f"not set, and torchrun's default {TORCHRUN_PORT} is in use here "
                                                 f"({busy}): give --master-port with a free port")
        return Check("MASTER_PORT", OK, f"not set; torchrun's default {TORCHRUN_PORT} is free here")
    if not text.strip().isdigit() or not 0 < int(text) < 65536:
        return Check("MASTER_PORT", FAILED, f"{text!r} is not a port number (1 to 65535)")
    port = int(text)
    if "MASTER_ADDR" in env and addresses is None:
        return Check("MASTER_PORT", WARNING, f"{port} not checked: MASTER_ADDR does not resolve")
    if addresses is not None and not any(is_local(address) for address in addresses):
        return Check("MASTER_PORT", OK, f"{port}: MASTER_ADDR is another host; run `migrate doctor` there to check it")
    busy = port_busy(port)
    if not busy:
        return Check("MASTER_PORT", OK, f"{port} is free here")
    if "TORCHELASTIC_RUN_ID" in env:
        return Check("MASTER_PORT", WARNING, f"{port} is in use ({busy}): inside a torchrun launch its store holds it")
    return Check("MASTER_PORT", FAILED, f"{port} is in use on this host ({busy}): the rendezvous cannot listen on it; "
                                        "pick a free port or stop what holds it (`ss -ltnp`)")


def port_busy(port: int) -> str:
    """Why `port` cannot be bound on every address of this host ("" when it is free): bound with
    SO_REUSEADDR, as torch's store does, then released at once."""
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))
        except OSError as error:
            if family == socket.AF_INET6 and error.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):  # no IPv6 here
                continue
            return error.strerror or str(error)
    return ""


def is_local(address: str) -> bool:
    """Whether `address` belongs to this host (it can be bound)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def interfaces_check(env: Mapping[str, str], interfaces: tuple[str, ...], backend: str) -> Check:
    """NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME against this host's interfaces: failed when the
    variable of the backend in use names none, a warning for the other backend's."""
    here = ", ".join(interfaces) or "none found"
    found = []
    for name, matcher, user in (("NCCL_SOCKET_IFNAME", nccl_interfaces, "nccl"),
                                ("GLOO_SOCKET_IFNAME", gloo_interfaces, "gloo")):
        if name not in env:
            continue
        missing = matcher(env[name], interfaces)
        if missing:
            if user == backend:
                return Check("socket interfaces", FAILED, f"{name}={env[name]!r} {missing} (this host has: {here}); "
                                                          f"{user} cannot open its sockets: fix or unset it")
            return Check("socket interfaces", WARNING, f"{name}={env[name]!r} {missing} (this host has: {here}); "
                                                       f"--backend {backend} does not read it, but a {user} launch "
                                                       "cannot open its sockets: fix or unset it")
        found.append(f"{name}={env[name]}")
    if not found:
        return Check("socket interfaces", OK, f"NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME not set (this host has: {here})")
    return Check("socket interfaces", OK, f"{', '.join(found)} match interfaces of this host ({here})")


def nccl_interfaces(spec: str, interfaces: tuple[str, ...]) -> str:
    """"" when NCCL_SOCKET_IFNAME leaves NCCL an interface, else what is wrong: a list of name
    prefixes, `=` first for exact names, `^` first to exclude them."""
    text = spec.strip()
    exclude = text.startswith("^")
    text = text.removeprefix("^")
    exact = text.startswith("=")
    text = text.removeprefix("=")
    wanted = [part.strip() for part in text.split(",") if part.strip()]
    if not wanted:
        return "names no interface"

    def matches(interface: str) -> bool:
        return any(interface == part if exact else interface.startswith(part) for part in wanted)

    chosen = [interface for interface in interfaces if matches(interface) != exclude]
    if chosen:
        return ""
    return "excludes every interface" if exclude else "names no interface of this host"


def gloo_interfaces(spec: str, interfaces: tuple[str, ...]) -> str:
    """"" when every name GLOO_SOCKET_IFNAME lists (exact, comma-separated) is an interface here."""
    wanted = [part.strip() for part in spec.split(",") if part.strip()]
    if not wanted:
        return "names no interface"
    missing = [name for name in wanted if name not in interfaces]
    return f"names {', '.join(missing)}, not an interface of this host" if missing else ""


def shm_check(shm: tuple[int, int] | str) -> Check:
    if isinstance(shm, str):
        return Check("/dev/shm", WARNING, f"cannot read its size ({shm}): NCCL and DataLoader workers need it")
    size, free = shm
    said = f"{_size(size)}, {_size(free)} free"
    if min(size, free) < SHM_MINIMUM:
        return Check("/dev/shm", WARNING, f"{said}: under 1 GiB, NCCL's and DeepSpeed's shared-memory buffers and "
                                          "DataLoader batches run out (docker's default is 64 MiB); run the container "
                                          "with --shm-size=8g or --ipc=host")
    return Check("/dev/shm", OK, said)


def _size(count: int) -> str:
    return f"{count / GIB:.1f} GiB" if count >= GIB else f"{count / MIB:.0f} MiB"


def nofile_check(nofile: tuple[int, int] | None) -> Check:
    if nofile is None:
        return Check("open files", WARNING, "cannot read RLIMIT_NOFILE")
    soft, hard = nofile
    if soft == resource.RLIM_INFINITY or soft >= NOFILE_MINIMUM:
        return Check("open files", OK, f"soft limit {_limit(soft)} (hard {_limit(hard)})")
    if hard == resource.RLIM_INFINITY or hard >= NOFILE_MINIMUM:
        fix = f"`ulimit -n {_limit(hard) if hard != resource.RLIM_INFINITY else 65536}` before the launch"
    else:
        fix = "raise the hard limit (limits.conf, or docker's --ulimit nofile=65536:65536)"
    return Check("open files", WARNING, f"soft limit {soft} (hard {_limit(hard)}): under {NOFILE_MINIMUM}, ranks' "
                                        f"sockets and DataLoader workers' shared tensors run out ('Too many open "
                                        f"files'); {fix}")


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


# ---------------------------------------------------------------- the probe

def probe_command(nproc: int, backend: str, records: Path, timeout: float) -> list[str]:
    size, repetitions = PROBE_SIZES[backend]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "migrate.doctor_probe", "--backend", backend, "--out", str(records),
            "--timeout", f"{max(1.0, timeout / 2):g}", "--bytes", str(size), "--repetitions", str(repetitions)]


def probe_check(options: DoctorOptions, machine: Machine) -> Check:
    """Launch the probe in a temporary folder (removed after) and judge what it recorded."""
    backend = chosen_backend(options, machine.torch)
    folder = Path(tempfile.mkdtemp(prefix="migrate-doctor-"))
    try:
        env = probe_environment(machine.env)
        run = supervise_probe(probe_command(options.nproc, backend, folder, options.timeout), folder,
                              options.timeout, env)
        return judge_probe(run, options.nproc, backend, options.timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def probe_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment as it is, with this package importable by `-m migrate.doctor_probe`."""
    root = str(Path(__file__).resolve().parent.parent)
    paths = [root, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != root)]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def supervise_probe(command: list[str], records: Path, timeout: float, env: Mapping[str, str]) -> ProbeRun:
    """Run `command` in `records` (its output in records/launch.log) for at most `timeout` seconds;
    every process it started, even one that left its session, is gone when this returns."""
    from migrate.verify.processes import ProcessTree, signals_blocked, signals_raise

    log = records / "launch.log"
    begin, timed_out = time.monotonic(), False
    process: subprocess.Popen[bytes] | None = None
    with signals_raise():
        tree = ProcessTree()
        try:
            with open(log, "wb") as output:
                process = subprocess.Popen(command, cwd=records, env={**env, **tree.tag("probe")}, stdout=output,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            tree.launched(process.pid)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                tree.stop("probe", process, STOP_GRACE)
        finally:
            with signals_blocked():
                tree.kill("probe")
                if process is not None:
                    process.wait()
                tree.close()
    assert process is not None  # Popen raised otherwise
    return ProbeRun(returncode=None if timed_out else process.returncode, timed_out=timed_out,
                    seconds=time.monotonic() - begin, records=read_records(records), output=_tail(log))


def read_records(folder: Path) -> dict[int, list[dict[str, object]]]:
    """rank -> the steps it recorded (rank<R>.jsonl, one JSON object a line; a cut last line skipped)."""
    found: dict[int, list[dict[str, object]]] = {}
    for path in folder.glob("rank*.jsonl"):
        rank = path.stem.removeprefix("rank")
        if not rank.isdigit():
            continue
        lines = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        found[int(rank)] = lines
    return found


def _tail(log: Path, limit: int = 4000) -> str:
    try:
        return log.read_bytes()[-limit:].decode("utf-8", errors="replace")
    except OSError:
        return ""


def judge_probe(run: ProbeRun, nproc: int, backend: str, timeout: float) -> Check:
    seen = reached(run.records, nproc)
    if run.timed_out and not run.records:
        return Check("probe", FAILED, f"no process started within {timeout:g} s (torchrun and each process import "
                                      "torch first, seconds on a busy machine): give a larger --timeout; every "
                                      f"process it started was stopped. Last output: {last_error_line(run.output) or 'none'}")
    if run.timed_out:
        return Check("probe", FAILED, f"no end within {timeout:g} s (a hang?): {seen}; every process it started was "
                                      f"stopped. {_debug_hint(backend)}")
    for rank in sorted(run.records):
        error = next((r for r in run.records[rank] if r.get("step") == "error"), None)
        if error is not None:
            return Check("probe", FAILED, f"rank {rank} failed at {error.get('at')}: {error.get('error')} ({seen}). "
                                          f"{_debug_hint(backend)}")
    done = [rank for rank, steps in run.records.items() if any(s.get("step") == "done" for s in steps)]
    if run.returncode != 0 or len(done) < nproc:
        return Check("probe", FAILED, f"the launch ended with status {run.returncode} ({seen}): "
                                      f"{last_error_line(run.output) or 'no output'}")
    wrong = wrong_sum(run.records)
    if wrong:
        return Check("probe", FAILED, wrong)
    return Check("probe", OK, bandwidth_said(run, nproc, backend))


def reached(records: dict[int, list[dict[str, object]]], nproc: int) -> str:
    """Where each rank got to: "rank 0 reached barrier, rank 1 never started"."""
    said = []
    for rank in range(nproc):
        steps = [str(s.get("step")) for s in records.get(rank, ()) if s.get("step") in STEPS]
        said.append(f"rank {rank} {'reached ' + steps[-1] if steps else 'never started'}")
    return ", ".join(said)


def _debug_hint(backend: str) -> str:
    more = "NCCL_DEBUG=INFO and " if backend == "nccl" else ""
    return f"Run again with {more}TORCH_DISTRIBUTED_DEBUG=DETAIL set to see more"


def last_error_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "error" in line]
    return (errors or lines or [""])[-1][:300]


def wrong_sum(records: dict[int, list[dict[str, object]]]) -> str:
    for rank in sorted(records):
        for step in records[rank]:
            if step.get("step") == "all_reduce" and step.get("got") != step.get("expected"):
                return (f"rank {rank}: the all-reduce of a known tensor gave {step.get('got')}, expected "
                        f"{step.get('expected')}: the backend returns wrong sums; check the GPUs' peer access "
                        "(NCCL_P2P_DISABLE=1 tells) and the driver")
    return ""


def bus_bandwidth(size: int, seconds: float, nproc: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s of an all-reduce of `size` bytes taking `seconds`, as nccl-tests
    defines them: algbw = size / time, busbw = algbw x 2(n-1)/n."""
    algbw = size / seconds / 1e9
    return algbw, algbw * 2 * (nproc - 1) / nproc


def _recorded_number(step: dict[str, object], key: str) -> float:
    """A number the probe recorded (0 when it recorded none, or something else)."""
    value = step.get(key, 0)
    return float(value) if isinstance(value, (int, float)) else 0.0


def bandwidth_said(run: ProbeRun, nproc: int, backend: str) -> str:
    step = next((s for s in run.records.get(0, ()) if s.get("step") == "bandwidth"), {})
    size, seconds = int(_recorded_number(step, "bytes")), _recorded_number(step, "seconds")
    sums = f"{nproc} process(es), {backend}: the all-reduce of a known tensor summed right on every rank, the barrier passed"
    if size <= 0 or seconds <= 0:
        return f"{sums}; no timing recorded"
    algbw, busbw = bus_bandwidth(size, seconds, nproc)
    return (f"{sums}; all-reduce of {size / MIB:g} MiB: {seconds * 1e3:.1f} ms, algbw {algbw:.2f} GB/s, "
            f"busbw {busbw:.2f} GB/s (busbw = algbw x 2(n-1)/n, as nccl-tests); {run.seconds:.1f} s in all")


# ---------------------------------------------------------------- the report

def diagnose(machine: Machine, options: DoctorOptions) -> list[Check]:
    """Every check; the probe runs unless --no-probe, or torch or the backend already failed."""
    checks = environment_checks(machine, options)
    if not options.probe:
        return checks
    blocking = [c.name for c in checks if c.status == FAILED and c.name in ("torch", "backend")]
    if blocking:
        checks.append(Check("probe", WARNING, f"not run: the {blocking[0]} check failed"))
    else:
        checks.append(probe_check(options, machine))
    return checks


def exit_status(checks: list[Check]) -> int:
    return 1 if any(check.status == FAILED for check in checks) else 0


def render_text(checks: list[Check]) -> str:
    width = max(len(check.name) for check in checks)
    lines = [f"{check.status:<8} {check.name:<{width}}  {check.detail}" for check in checks]
    return "\n".join([*lines, summary(checks)]) + "\n"


def render_json(checks: list[Check], backend: str, nproc: int) -> str:
    document = {"backend": backend, "nproc": nproc,
                "failed": sum(c.status == FAILED for c in checks), "warnings": sum(c.status == WARNING for c in checks),
                "checks": [{"name": c.name, "status": c.status, "detail": c.detail} for c in checks]}
    return json.dumps(document, indent=2) + "\n"


def summary(checks: list[Check]) -> str:
    failed = sum(check.status == FAILED for check in checks)
    warned = sum(check.status == WARNING for check in checks)
    if not failed and not warned:
        return f"all {len(checks)} checks ok"
    return f"{failed} failed, {warned} warning(s), {len(checks) - failed - warned} ok"

