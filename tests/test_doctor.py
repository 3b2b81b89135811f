"""`migrate doctor`: each check's verdicts on made-up facts, the probe's judgement and its hang
handling with a stand-in launch, the command's options, report and exit status through a typer app
of the test's own; one real 2-process gloo probe (slow)."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

from migrate import doctor
from migrate.doctor import FAILED, OK, WARNING, Check, DoctorOptions, Gpu, Machine, ProbeRun, TorchFacts
from migrate.doctor_command import doctor as doctor_command

CPU_TORCH = TorchFacts(version="2.13.0+cpu")
CUDA_TORCH = TorchFacts(version="2.13.0+cu128", cuda_built="12.8", cuda_available=True, nccl="2.27.3",
                        gpus=(Gpu("NVIDIA H200", 140 << 30),), nccl_backend=True)
CLEARED = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
           "GROUP_RANK", "TORCHELASTIC_RUN_ID", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", doctor.SHM_OVERRIDE)


def no_lookup(host: str) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def machine(env: dict[str, str] | None = None, facts: TorchFacts = CPU_TORCH, **changes: object) -> Machine:
    made = Machine(torch=facts, env=env or {}, shm=(8 << 30, 8 << 30), nofile=(65536, 65536),
                   interfaces=("lo", "eth0", "ib0"), resolve=lambda host: ["127.0.0.1"])
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


def run_checks(env: dict[str, str], options: DoctorOptions = DoctorOptions(probe=False), **changes: object) -> dict[str, Check]:
    return by_name(doctor.diagnose(machine(env, **changes), options))


@pytest.fixture
def listening() -> Iterator[int]:
    """A port this test holds, listening on 127.0.0.1."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


# ---------------------------------------------------------------- bandwidth

def test_bus_bandwidth_is_nccl_tests_algbw_times_2_n_minus_1_over_n() -> None:
    assert doctor.bus_bandwidth(2_000_000_000, 1.0, 2) == (2.0, 2.0)
    algbw, busbw = doctor.bus_bandwidth(1_000_000_000, 0.5, 8)
    assert algbw == 2.0 and busbw == pytest.approx(3.5)
    assert doctor.bus_bandwidth(1_000_000_000, 1.0, 1)[1] == 0.0  # one process moves nothing


# ---------------------------------------------------------------- variables

def test_rank_at_or_past_world_size_fails() -> None:
    check = run_checks({"RANK": "3", "WORLD_SIZE": "2"})["rank variables"]
    assert check.status == FAILED
    assert "RANK=3 with WORLD_SIZE=2: ranks run from 0 to 1" in check.detail


@pytest.mark.parametrize(("env", "status", "said"), [
    ({"LOCAL_RANK": "0"}, WARNING, "LOCAL_RANK=0 is set without RANK"),
    ({"RANK": "0"}, WARNING, "RANK is set without WORLD_SIZE"),
    ({"RANK": "x", "WORLD_SIZE": "2"}, FAILED, "RANK='x' is not a whole number >= 0"),
    ({"WORLD_SIZE": "0", "RANK": "0"}, FAILED, "WORLD_SIZE='0' is not a whole number >= 1"),
    ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, FAILED,
     "LOCAL_RANK=2 with LOCAL_WORLD_SIZE=2"),
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, OK, "consistent: RANK=1 WORLD_SIZE=2 LOCAL_RANK=1"),
    ({}, OK, "none set"),
])
def test_rank_variables(env: dict[str, str], status: str, said: str) -> None:
    check = run_checks(env)["rank variables"]
    assert check.status == status and said in check.detail


def test_launcher_variables_lists_those_set() -> None:
    env = {"MASTER_ADDR": "127.0.0.1", "NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "INFO", "HOME": "/root"}
    check = run_checks(env)["launcher variables"]
    assert check.detail == "MASTER_ADDR=127.0.0.1 NCCL_DEBUG=INFO NCCL_IB_DISABLE=1"


def test_world_size_without_master_address_or_port_fails() -> None:
    checks = run_checks({"RANK": "0", "WORLD_SIZE": "2"})
    assert checks["MASTER_ADDR"].status == FAILED and "MASTER_ADDR is not" in checks["MASTER_ADDR"].detail
    assert checks["MASTER_PORT"].status == FAILED and "MASTER_PORT is not" in checks["MASTER_PORT"].detail


def test_a_master_address_that_does_not_resolve_fails() -> None:
    checks = run_checks({"MASTER_ADDR": "node-7", "MASTER_PORT": "29400"}, resolve=no_lookup)
    assert checks["MASTER_ADDR"] == Check("MASTER_ADDR", FAILED, "'node-7' does not resolve (Name or service not "
                                          "known): every rank connects to it; give the first node's IP address or "
                                          "a name every node resolves")
    assert checks["MASTER_PORT"].status == WARNING and "not checked" in checks["MASTER_PORT"].detail


def test_the_real_resolver_refuses_a_reserved_name() -> None:
    with pytest.raises(OSError):
        doctor.resolve("no-such-host.invalid")  # RFC 6761: .invalid never resolves
    assert "127.0.0.1" in doctor.resolve("127.0.0.1")


def test_a_busy_master_port_fails_and_a_free_one_passes(listening: int) -> None:
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(listening)}
    check = run_checks(env)["MASTER_PORT"]
    assert check.status == FAILED and f"{listening} is in use on this host" in check.detail
    inside = run_checks({**env, "TORCHELASTIC_RUN_ID": "x"})["MASTER_PORT"]
    assert inside.status == WARNING and "inside a torchrun launch" in inside.detail


def test_a_free_master_port_is_released_after_the_check() -> None:
    with socket.socket() as finder:
        finder.bind(("127.0.0.1", 0))
        port = finder.getsockname()[1]
    check = run_checks({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})["MASTER_PORT"]
    assert check == Check("MASTER_PORT", OK, f"{port} is free here")
    with socket.socket() as again:  # the check let it go
        again.bind(("127.0.0.1", port))


@pytest.mark.parametrize("port", ["http", "0", "70000"])
def test_a_master_port_that_is_no_port_fails(port: str) -> None:
    check = run_checks({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})["MASTER_PORT"]
    assert check == Check("MASTER_PORT", FAILED, f"{port!r} is not a port number (1 to 65535)")


def test_a_master_address_of_another_host_leaves_the_port_to_that_host() -> None:
    checks = run_checks({"MASTER_ADDR": "node1", "MASTER_PORT": "29400"}, resolve=lambda host: ["192.0.2.1"])
    assert checks["MASTER_PORT"].status == OK and "another host" in checks["MASTER_PORT"].detail


@pytest.mark.parametrize(("env", "backend", "status", "said"), [
    ({"NCCL_SOCKET_IFNAME": "ens"}, "nccl", FAILED, "'ens' names no interface of this host (this host has: lo, eth0, ib0)"),
    ({"NCCL_SOCKET_IFNAME": "ens"}, "gloo", WARNING, "--backend gloo does not read it"),
    ({"NCCL_SOCKET_IFNAME": "^lo,eth,ib"}, "nccl", FAILED, "excludes every interface"),
    ({"NCCL_SOCKET_IFNAME": "=eth"}, "nccl", FAILED, "names no interface"),
    ({"NCCL_SOCKET_IFNAME": "eth"}, "nccl", OK, "NCCL_SOCKET_IFNAME=eth match"),
    ({"NCCL_SOCKET_IFNAME": "^docker,lo"}, "nccl", OK, "match"),
    ({"GLOO_SOCKET_IFNAME": "eth0,eth1"}, "gloo", FAILED, "names eth1, not an interface of this host"),
    ({}, "gloo", OK, "not set"),
])
def test_socket_interfaces(env: dict[str, str], backend: str, status: str, said: str) -> None:
    facts = CUDA_TORCH if backend == "nccl" else CPU_TORCH
    check = run_checks(env, DoctorOptions(backend=backend, nproc=1, probe=False), torch=facts)["socket interfaces"]
    assert check.status == status and said in check.detail


# ---------------------------------------------------------------- the machine

def test_a_tiny_dev_shm_warns() -> None:
    shm = doctor.read_shm({doctor.SHM_OVERRIDE: str(64 << 20)})
    assert shm == (64 << 20, 64 << 20)
    check = doctor.shm_check(shm)
    assert check.status == WARNING and check.detail.startswith("64 MiB, 64 MiB free: under 1 GiB")
    assert "--shm-size" in check.detail
    assert doctor.shm_check((8 << 30, 8 << 30)) == Check("/dev/shm", OK, "8.0 GiB, 8.0 GiB free")
    assert doctor.shm_check((8 << 30, 100 << 20)).status == WARNING  # big but full


def test_the_shm_override_must_be_a_number_and_the_real_one_reads() -> None:
    check = doctor.shm_check(doctor.read_shm({doctor.SHM_OVERRIDE: "64M"}))
    assert check.status == WARNING and "MIGRATE_DOCTOR_SHM_BYTES='64M' is not a number of bytes" in check.detail
    assert isinstance(doctor.read_shm({}), tuple) or not os.path.isdir("/dev/shm")


@pytest.mark.parametrize(("limits", "status", "said"), [
    ((1024, 1024), WARNING, "raise the hard limit"),
    ((1024, 65536), WARNING, "`ulimit -n 65536` before the launch"),
    ((65536, 65536), OK, "soft limit 65536 (hard 65536)"),
])
def test_open_file_limit(limits: tuple[int, int], status: str, said: str) -> None:
    check = doctor.nofile_check(limits)
    assert check.status == status and said in check.detail


def test_nccl_without_cuda_fails_and_the_probe_is_not_run() -> None:
    checks = run_checks({}, DoctorOptions(backend="nccl"))
    assert checks["backend"].status == FAILED and "--backend nccl needs CUDA" in checks["backend"].detail
    assert checks["probe"] == Check("probe", WARNING, "not run: the backend check failed")


def test_nccl_needs_a_gpu_per_process_and_reports_the_gpus() -> None:
    checks = run_checks({"CUDA_VISIBLE_DEVICES": "0"}, DoctorOptions(nproc=2, probe=False), torch=CUDA_TORCH)
    assert checks["backend"].status == FAILED and "--nproc 2 with 1 visible GPU(s)" in checks["backend"].detail
    assert checks["gpus"].detail == "1 visible (0: NVIDIA H200 (140.0 GiB)); CUDA_VISIBLE_DEVICES='0'"
    assert checks["cuda"].detail == "available, CUDA 12.8"
    assert checks["nccl"].detail == "NCCL 2.27.3"


def test_no_torch_fails_and_the_probe_is_not_run() -> None:
    checks = run_checks({}, DoctorOptions(), torch=TorchFacts(version=None, error="ModuleNotFoundError: torch"))
    assert checks["torch"].status == FAILED and "cannot import torch" in checks["torch"].detail
    assert "backend" not in checks and checks["probe"].detail == "not run: the torch check failed"


@pytest.mark.parametrize(("reported", "said"), [((2, 27, 3), "2.27.3"), ((2, 21, 5, "+cuda12.4"), "2.21.5 (+cuda12.4)"),
                                               (2708, "2.7.8")])
def test_nccl_version_as_torch_reports_it(reported: object, said: str) -> None:
    fake = SimpleNamespace(cuda=SimpleNamespace(nccl=SimpleNamespace(version=lambda: reported)))
    assert doctor._nccl_version(fake) == (said, "")


# ---------------------------------------------------------------- the probe's verdict

def records(*ranks: list[str], **extra: dict[str, object]) -> dict[int, list[dict[str, object]]]:
    return {rank: [{"step": step, **extra.get(f"{rank}:{step}", {})} for step in steps] for rank, steps in enumerate(ranks)}


ALL_STEPS = ["start", "init", "all_reduce", "barrier", "bandwidth", "done"]
SUMMED = {"got": 3.0, "expected": 3.0}


def test_a_finished_probe_reports_its_bus_bandwidth() -> None:
    found = records(ALL_STEPS, ALL_STEPS, **{"0:all_reduce": SUMMED, "1:all_reduce": SUMMED,
                                             "0:bandwidth": {"bytes": 16 << 20, "seconds": 0.016777216}})
    check = doctor.judge_probe(ProbeRun(0, False, 9.0, found), 2, "gloo", 60)
    assert check.status == OK
    assert "all-reduce of 16 MiB: 16.8 ms, algbw 1.00 GB/s, busbw 1.00 GB/s" in check.detail


def test_a_wrong_sum_fails() -> None:
    found = records(ALL_STEPS, ALL_STEPS, **{"1:all_reduce": {"got": 2.0, "expected": 3.0}})
    check = doctor.judge_probe(ProbeRun(0, False, 9.0, found), 2, "nccl", 60)
    assert check.status == FAILED and "rank 1: the all-reduce of a known tensor gave 2.0, expected 3.0" in check.detail


def test_a_rank_error_is_reported_with_where_each_rank_was() -> None:
    found = records(["start", "init"], ["start", "error"], **{"1:error": {"at": "init", "error": "RuntimeError: boom"}})
    check = doctor.judge_probe(ProbeRun(1, False, 9.0, found), 2, "nccl", 60)
    assert check.status == FAILED
    assert check.detail.startswith("rank 1 failed at init: RuntimeError: boom (rank 0 reached init, rank 1 reached start)")
    assert "NCCL_DEBUG=INFO" in check.detail


def test_a_launch_stopped_before_any_process_started_asks_for_more_time() -> None:
    check = doctor.judge_probe(ProbeRun(None, True, 4.0, {}, output=""), 2, "gloo", 4)
    assert check.status == FAILED and check.detail.startswith("no process started within 4 s")
    assert "give a larger --timeout" in check.detail


def test_a_launch_that_ends_early_is_reported_with_its_last_error() -> None:
    run = ProbeRun(1, False, 2.0, {}, output="W0 warning\ntorch.distributed.DistNetworkError: no port\n")
    check = doctor.judge_probe(run, 2, "gloo", 60)
    assert check == Check("probe", FAILED, "the launch ended with status 1 (rank 0 never started, rank 1 never "
                                           "started): torch.distributed.DistNetworkError: no port")


@pytest.mark.slow  # two stand-in processes that sleep: under 2 s, a fraction of a CPU second
def test_a_hang_is_stopped_whole_and_reported_with_what_was_seen(tmp_path: Path) -> None:
    """A stand-in launch: rank 0 gets to init and waits; a process it started left its session."""
    stand_in = tmp_path / "hang.py"
    stand_in.write_text(textwrap.dedent(f"""\
        import json, os, subprocess, sys, time
        with open("rank0.jsonl", "w") as out:
            out.write(json.dumps({{"step": "start"}}) + "\\n" + json.dumps({{"step": "init"}}) + "\\n")
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        with open({str(tmp_path / "child.pid")!r}, "w") as out:
            out.write(str(child.pid))
        time.sleep(60)
        """))
    records_folder = tmp_path / "records"
    records_folder.mkdir()
    begin = time.monotonic()
    run = doctor.supervise_probe([sys.executable, str(stand_in)], records_folder, 1.5, dict(os.environ))
    assert time.monotonic() - begin < 1.5 + doctor.STOP_GRACE + 2
    assert run.timed_out
    check = doctor.judge_probe(run, 2, "gloo", 1.5)
    assert check.status == FAILED
    assert check.detail.startswith("no end within 1.5 s (a hang?): rank 0 reached init, rank 1 never started; every "
                                   "process it started was stopped")
    child = int((tmp_path / "child.pid").read_text())
    assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split(") ")[1][0] == "Z"


# ---------------------------------------------------------------- the command

def app() -> typer.Typer:
    made = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    made.command("doctor")(doctor_command)
    made.command("other", hidden=True)(lambda: None)  # two commands: `doctor` stays a subcommand
    return made


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(doctor, "read_torch", lambda: CPU_TORCH)  # torch's own import takes seconds
    monkeypatch.setattr(doctor, "read_nofile", lambda: (65536, 65536))
    monkeypatch.setenv(doctor.SHM_OVERRIDE, str(8 << 30))
    return monkeypatch


@pytest.mark.parametrize(("options", "said"), [
    (["--nproc", "0"], "--nproc"),
    (["--backend", "mpi"], "'mpi': choose gloo or nccl"),
    (["--report", "xml"], "'xml': choose text or json"),
    (["--timeout", "0"], "--timeout"),
    (["--timeout", "nan"], "--timeout"),
])
def test_bad_options_exit_2(clean_env: pytest.MonkeyPatch, options: list[str], said: str) -> None:
    result = CliRunner().invoke(app(), ["doctor", "--no-probe", *options])
    assert result.exit_code == 2, result.output
    assert said in result.output


def test_a_clean_environment_exits_0_in_text(clean_env: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(app(), ["doctor", "--no-probe"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "ok       torch               2.13.0+cpu"
    assert lines[-1].endswith("ok") and "failed" not in result.stdout.replace("0 failed", "")


def test_json_report_of_contradictions_exits_1(clean_env: pytest.MonkeyPatch, listening: int) -> None:
    clean_env.setenv("RANK", "3")
    clean_env.setenv("WORLD_SIZE", "2")
    clean_env.setenv("MASTER_ADDR", "127.0.0.1")
    clean_env.setenv("MASTER_PORT", str(listening))
    clean_env.setenv(doctor.SHM_OVERRIDE, str(64 << 20))
    result = CliRunner().invoke(app(), ["doctor", "--no-probe", "--report", "json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"backend", "nproc", "failed", "warnings", "checks"}
    assert (document["backend"], document["nproc"], document["failed"], document["warnings"]) == ("gloo", 2, 2, 1)
    statuses = {check["name"]: check["status"] for check in document["checks"]}
    assert statuses["rank variables"] == FAILED and statuses["MASTER_PORT"] == FAILED
    assert statuses["/dev/shm"] == WARNING and statuses["MASTER_ADDR"] == OK
    assert all(set(check) == {"name", "status", "detail"} for check in document["checks"])


def test_a_non_resolving_master_address_exits_1(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("MASTER_ADDR", "no-such-host.invalid")
    result = CliRunner().invoke(app(), ["doctor", "--no-probe"])
    assert result.exit_code == 1
    assert "failed   MASTER_ADDR         'no-such-host.invalid' does not resolve" in result.stdout


@pytest.mark.slow
@pytest.mark.full  # a real launch: about 15 s and 2 torch imports, outside CI's budget
def test_a_real_two_process_gloo_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app(), ["doctor", "--nproc", "2", "--backend", "gloo", "--report", "json",
                                        "--timeout", "60"])
    document = json.loads(result.stdout)
    probe = by_name([Check(**check) for check in document["checks"]])["probe"]
    assert probe.status == OK, probe.detail
    assert "summed right on every rank, the barrier passed" in probe.detail and "busbw" in probe.detail
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran

