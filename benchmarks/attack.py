"""The attack on the CLI, re-run: each way the tool could lose a user's file, outlive its limits or
run code it was only asked to read, counted. Printed, not asserted; every count should be 0.

Each probe drives the installed `migrate` command (a fresh process, as a user would) in a temporary
folder and counts what went wrong:

  verify user files      files of the user's folder (or outside it) that `migrate verify` changed:
                         a symlinked script, a >8 MiB checkpoint the script overwrites, a symlink
                         to a file outside the folder that the script writes, `--keep` on a folder
                         that holds files
  verify over timeout    `verify --timeout 10 --max-time 60` on a script that starts a daemon
                         (fork + setsid) holding its output and printing every second: 1 if verify
                         ran past --max-time plus two minutes, plus each of the daemon's
                         processes still alive afterwards
  verify after SIGTERM   training processes still alive, and work folders left, after SIGTERM
                         to a running verify
  reading runs code      marker files made by commands a repository's `.git/config` names
                         (core.fsmonitor, hooks, an alias) while `--check` searches the folder
  newline accepted       values ending or starting with a newline that `migrate launch` accepts
                         (--master-addr, --image, --partition, --time, hosts, pdsh arguments)
  half-written batch     `--write` of two scripts whose third rename fails (ENOSPC, injected):
                         a batch left partly converted, a launcher beside an unconverted
                         script, or a message naming a temporary file
  setuid dropped         a setuid/setgid script that lost the bits through `--write`
  memory abort           a 3 MB file of dense literals under a 2 GiB address-space limit that
                         ends in a signal or an internal error instead of a clean refusal
  temp files left        `.migrate-*.tmp` files left after SIGKILLs during `--write` and one
                         complete re-run
  hostfile hang          `launch --hostfile` on a FIFO or /dev/zero still running after 20 s
  compile errors         inputs CPython rejects at compile time reported as an internal error,
                         or without their line

Run: .venv/bin/python benchmarks/attack.py [--skip-verify] [--kills 10]
(about 3 minutes on 2 cores with the verify probes, which need torch; under 30 s without).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIGRATE = [sys.executable, "-m", "migrate"]

TRAIN = textwrap.dedent('''\
    """A tiny script the probes convert and verify."""
    import os

    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    SLOW = float(os.environ.get("ATTACK_SLOW", "0"))


    def main():
        torch.manual_seed(0)
        x = torch.randn(64, 4)
        y = x.sum(1, keepdim=True)
        loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(model(xb), yb)
                loss.backward()
                optimizer.step()
                torch.save(model.state_dict(), "model.pt")
                with open("log/out.txt", "w") as log:
                    log.write(f"{loss.item()}\\n")
                if SLOW:
                    __import__("time").sleep(SLOW)


    if __name__ == "__main__":
        main()
    ''')

DAEMON = '''
import os as _os
import sys as _sys
import time as _time
_pid = _os.fork()
if _pid == 0:
    _os.setsid()
    if _os.fork() == 0:
        with open(_os.environ["ATTACK_PIDS"] + f"/daemon-{_os.getpid()}", "w"):
            pass
        while True:
            _sys.stdout.write("daemon alive\\n")
            _sys.stdout.flush()
            _time.sleep(1)
    _os._exit(0)
'''

RECORD_PID = '''
import os as _os
with open(_os.environ["ATTACK_PIDS"] + f"/train-{_os.getpid()}", "w"):
    pass
'''


# -- helpers -----------------------------------------------------------------------------------------
def run(args: list[str], cwd: Path, timeout: float = 300, env: dict[str, str] | None = None,
        limit_as: int | None = None) -> subprocess.CompletedProcess[str] | None:
    """A migrate command; None when it ran past `timeout` (it is killed)."""
    def preexec() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    try:
        return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                              preexec_fn=preexec if limit_as else None, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder`: a symlink's target, a file's mode and sha256."""
    found: dict[str, str] = {}
    for current, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(current) / name
            relative = str(path.relative_to(folder))
            if path.is_symlink():
                found[relative] = "-> " + os.readlink(path)
            elif path.is_file():
                found[relative] = f"{stat.S_IMODE(path.stat().st_mode):o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return found


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def pids_in(folder: Path, prefix: str) -> list[int]:
    return [int(p.name.split("-")[-1]) for p in folder.glob(f"{prefix}-*")]


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def user_folder(base: Path, extra: str = "") -> Path:
    folder = base / "user"
    (folder / "log").mkdir(parents=True)
    (folder / "train.py").write_text(TRAIN.replace("def main():", extra + "\n\ndef main():", 1) if extra else TRAIN)
    return folder


# -- probes ------------------------------------------------------------------------------------------
def verify_user_files(base: Path) -> tuple[int, str]:
    """Four folders whose files a careless copy would link back to; count what verify changed."""
    notes, count = [], 0
    cases: list[tuple[str, Callable[[Path, Path], list[str]]]] = [
        ("symlinked script", lambda f, o: ["train.py"]),
        ("large checkpoint", lambda f, o: ["train.py"]),
        ("symlink outside", lambda f, o: ["train.py"]),
        ("--keep with files", lambda f, o: ["--keep", str(f / "keep"), "train.py"]),
    ]
    for name, arguments in cases:
        case = base / name.replace(" ", "_").replace("-", "")
        outside = case / "outside"
        outside.mkdir(parents=True)
        folder = user_folder(case)
        if name == "symlinked script":
            (folder / "train.py").rename(folder / "train_v2.py")
            (folder / "train.py").symlink_to("train_v2.py")
        elif name == "large checkpoint":
            (folder / "model.pt").write_bytes(os.urandom(9 * 1024 * 1024))
        elif name == "symlink outside":
            (outside / "out.txt").write_text("the user's own log\n")
            shutil.rmtree(folder / "log")
            (folder / "log").mkdir()
            (folder / "log" / "out.txt").symlink_to(outside / "out.txt")
        else:
            (folder / "keep" / "original").mkdir(parents=True)
            (folder / "keep" / "original" / "train.py").write_text("# the user's own copy, kept by hand\n")
        before = snapshot(case)
        result = run([*MIGRATE, "verify", "--timeout", "60", *arguments(folder, outside)], folder, timeout=400)
        after = snapshot(case)
        lost = [k for k in changed(before, after) if not k.startswith("user/keep/") or k in before]
        if name == "--keep with files":
            lost = [k for k in changed(before, after) if k in before]
        count += len(lost)
        verdict = "timeout" if result is None else f"exit {result.returncode}"
        notes.append(f"{name}: {len(lost)} changed ({verdict}){' ' + ', '.join(lost[:3]) if lost else ''}")
    return count, "; ".join(notes)


def verify_over_timeout(base: Path) -> tuple[int, str]:
    pids = base / "pids"
    pids.mkdir()
    folder = user_folder(base, DAEMON)
    start = time.monotonic()
    result = run([*MIGRATE, "verify", "--timeout", "10", "--max-time", "60", "train.py"], folder, timeout=300,
                 env={"ATTACK_PIDS": str(pids), "ATTACK_SLOW": "30"})
    wall = time.monotonic() - start
    time.sleep(2)
    left = [pid for pid in pids_in(pids, "daemon") if alive(pid)]
    kill_all(pids_in(pids, "daemon"))
    over = 1 if result is None or wall > 60 + 120 else 0
    verdict = "killed at 300 s" if result is None else f"exit {result.returncode}"
    return over + len(left), f"{wall:.0f} s ({verdict}), {len(left)} daemon process(es) left"


def verify_after_sigterm(base: Path) -> tuple[int, str]:
    pids, scratch = base / "pids", base / "tmp"
    pids.mkdir()
    scratch.mkdir()
    folder = user_folder(base, RECORD_PID)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ATTACK_PIDS": str(pids), "ATTACK_SLOW": "5", "TMPDIR": str(scratch)}
    process = subprocess.Popen([*MIGRATE, "verify", "--timeout", "120", "train.py"], cwd=folder, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(pids_in(pids, "train")) < 2:  # the converted ranks started
        time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
    time.sleep(2)
    left = [pid for pid in pids_in(pids, "train") if alive(pid)]
    kill_all(pids_in(pids, "train"))
    folders = [p.name for p in scratch.iterdir() if p.name.startswith("migrate-verify")]
    return len(left) + len(folders), f"{len(left)} training process(es) alive, {len(folders)} work folder(s) left"


def reading_runs_code(base: Path) -> tuple[int, str]:
    repo = base / "repo"
    marker = base / "marker"
    (repo / "pkg").mkdir(parents=True)
    (repo / "train.py").write_text(TRAIN)
    (repo / "pkg" / "other.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "train.py"], check=True)
    hooks = repo / ".git" / "hooks"
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
        (hooks / hook).chmod(0o755)
    marker.unlink(missing_ok=True)
    with open(repo / ".git" / "config", "a") as config:
        config.write(f"[core]\n\tfsmonitor = echo fsmonitor >> {marker}; true\n"
                     f"\tpager = echo pager >> {marker}; cat\n"
                     f"[alias]\n\tls-files = !echo alias >> {marker}\n")
    result = run([*MIGRATE, "to-ddp", "--check", "."], repo, timeout=120)
    ran = [line.split()[0] for line in marker.read_text().splitlines() if line.strip()] if marker.exists() else []
    found = result is not None and "train.py" in result.stdout + result.stderr
    return len(ran), f"commands run: {ran or 'none'}; train.py {'found' if found else 'NOT found'}"


def newline_accepted(base: Path) -> tuple[int, str]:
    folder = user_folder(base)
    cases = {
        "--master-addr": ["ddp", "train.py", "--nnodes", "2", "--master-addr", "node1\n"],
        "--image": ["ddp", "train.py", "--scheduler", "kubernetes", "--nnodes", "2", "--nproc-per-node", "2",
                    "--image", "repo/train:1\n"],
        "--partition": ["ddp", "train.py", "--scheduler", "slurm", "--nproc-per-node", "2", "--partition", "gpu\n"],
        "--time": ["ddp", "train.py", "--scheduler", "slurm", "--nproc-per-node", "2", "--time", "1:00:00\n"],
        "--hosts": ["deepspeed", "train.py", "--hosts", "n1:2,n2:2\n"],
        "pdsh argument": ["deepspeed", "train.py", "--hosts", "n1:2,n2:2", "--", "-x\n", "touch", "X"],
        "leading newline": ["ddp", "train.py", "--nnodes", "2", "--master-addr", "\nnode1"],
    }
    accepted = []
    for name, arguments in cases.items():
        result = run([*MIGRATE, "launch", *arguments, "--out", "-"], folder, timeout=60)
        if result is not None and result.returncode == 0:
            accepted.append(name)
    return len(accepted), f"accepted: {', '.join(accepted) or 'none'} (of {len(cases)})"


FAIL_THIRD_RENAME = textwrap.dedent('''\
    import errno, os, sys
    real, calls = os.replace, [0]
    def failing(src, dst, *a, **k):
        if ".migrate-" in os.fspath(src):
            calls[0] += 1
            if calls[0] == 3:
                raise OSError(errno.ENOSPC, "No space left on device", os.fspath(dst))
        return real(src, dst, *a, **k)
    os.replace = failing
    sys.argv = ["migrate", *sys.argv[1:]]
    from migrate.cli import main
    main()
    ''')


def half_written_batch(base: Path) -> tuple[int, str]:
    folder = base / "batch"
    folder.mkdir()
    for name in ("a.py", "b.py"):
        (folder / name).write_text(TRAIN)
    before = snapshot(folder)
    result = run([sys.executable, "-c", FAIL_THIRD_RENAME, "to-ddp", "--write", "a.py", "b.py"], folder, timeout=120)
    after = snapshot(folder)
    output = "" if result is None else result.stdout + result.stderr
    converted = [k for k in ("a.py", "b.py") if before.get(k) != after.get(k)]
    launchers = [k for k in after if k.endswith(".sh")]
    defects = 0
    if converted and len(converted) < 2:
        defects += 1
    if any(f"run_{k[:-3]}_ddp.sh" in launchers and k not in converted for k in ("a.py", "b.py")):
        defects += 1
    if ".migrate-" in output:
        defects += 1
    if result is None or result.returncode == 0:
        defects += 1
    temps = [k for k in after if ".migrate-" in k]
    defects += len(temps)
    message = output.strip().splitlines()[-1] if output.strip() else "(nothing printed)"
    return defects, f"converted {converted or 'none'}, launchers {launchers or 'none'}, temps {len(temps)}; said: {message[:120]}"


def setuid_dropped(base: Path) -> tuple[int, str]:
    if os.geteuid() != 0:
        return 0, "skipped (needs root to set the bits on any group)"
    folder = base / "suid"
    folder.mkdir()
    script = folder / "train.py"
    script.write_text(TRAIN)
    script.chmod(0o6755)
    run([*MIGRATE, "to-ddp", "--write", "train.py"], folder, timeout=120)
    mode = stat.S_IMODE(script.stat().st_mode)
    return (0 if mode == 0o6755 else 1), f"mode after --write: {mode:o}"


def memory_abort(base: Path) -> tuple[int, str]:
    folder = base / "memory"
    folder.mkdir()
    rows = ",".join(str(i % 10) for i in range(200))
    lines = [f"table_{i} = [{rows}]" for i in range(7500)]
    (folder / "big.py").write_text(TRAIN + "\n" + "\n".join(lines) + "\n")
    size = (folder / "big.py").stat().st_size / 1e6
    result = run([*MIGRATE, "to-ddp", "--check", "big.py"], folder, timeout=600, limit_as=2 * 1024 ** 3)
    if result is None:
        return 1, f"{size:.1f} MB: still running after 600 s"
    output = (result.stdout + result.stderr).strip()
    bad = result.returncode < 0 or "internal error" in output.lower() or "Traceback" in output
    return (1 if bad else 0), f"{size:.1f} MB under 2 GiB: exit {result.returncode}: {output.splitlines()[-1][:140] if output else ''}"


def temp_files_left(base: Path, kills: int) -> tuple[int, str]:
    folder = base / "kills"
    folder.mkdir()
    samples = sorted(ROOT.glob("samples/*/train.py"))
    for index in range(40):
        (folder / f"s{index:02d}.py").write_bytes(samples[index % len(samples)].read_bytes())
    rng = random.Random(0)
    pristine = {p.name: p.read_bytes() for p in folder.glob("*.py")}
    start = time.monotonic()
    run([*MIGRATE, "to-ddp", "--write", "."], folder, timeout=600)
    duration = time.monotonic() - start  # a whole run: the kills land anywhere in it, writing included
    for _ in range(kills):
        for name, data in pristine.items():
            (folder / name).write_bytes(data)
        for launcher in folder.glob("run_*.sh"):
            launcher.unlink()
        process = subprocess.Popen([*MIGRATE, "to-ddp", "--write", "."], cwd=folder, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
        time.sleep(rng.uniform(0.3, duration))
        process.kill()
        process.wait()
    after_kills = len(list(folder.glob(".migrate-*")))
    run([*MIGRATE, "to-ddp", "--write", "."], folder, timeout=600)
    left = len(list(folder.glob(".migrate-*")))
    return left, f"{after_kills} temporary file(s) after {kills} SIGKILLs, {left} after a complete re-run"


def hostfile_hang(base: Path) -> tuple[int, str]:
    folder = user_folder(base)
    os.mkfifo(folder / "hosts.fifo")
    hung = []
    for name, path in (("FIFO", "hosts.fifo"), ("/dev/zero", "/dev/zero")):
        result = run([*MIGRATE, "launch", "deepspeed", "train.py", "--hostfile", path, "--out", "-"], folder, timeout=20)
        if result is None:
            hung.append(name)
    return len(hung), f"hung on: {', '.join(hung) or 'none'}"


COMPILE_ERRORS = {
    "return outside function": "x = 1\nreturn x\n",
    "nonlocal at module level": "nonlocal x\n",
    "break outside loop": "import torch\nbreak\n",
    "duplicate argument": "def f(a, a):\n    return a\n",
    "two starred targets": "*a, *b = [1, 2]\n",
    "yield outside function": "yield 1\n",
    "await outside async": "def f():\n    await g()\n",
}


def compile_errors(base: Path) -> tuple[int, str]:
    folder = base / "compile"
    folder.mkdir()
    bad = []
    for name, text in COMPILE_ERRORS.items():
        path = folder / (name.replace(" ", "_") + ".py")
        path.write_text(text)
        result = run([*MIGRATE, "to-ddp", "--check", path.name], folder, timeout=60)
        output = "" if result is None else result.stdout + result.stderr
        located = f"{path.name}:" in output and any(ch.isdigit() for ch in output.split(path.name + ":", 1)[-1][:4])
        if result is None or "internal error" in output.lower() or result.returncode != 2 or not located:
            bad.append(name)
    return len(bad), f"wrong: {', '.join(bad) or 'none'} (of {len(COMPILE_ERRORS)})"


# -- the table ---------------------------------------------------------------------------------------
def torch_available() -> bool:
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-verify", action="store_true", help="leave out the probes that run verify")
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs during --write (default 10)")
    parser.add_argument("--only", default="", help="comma-separated probe names (default: all)")
    arguments = parser.parse_args()
    probes: list[tuple[str, Callable[[Path], tuple[int, str]], bool]] = [
        ("verify user files", verify_user_files, True),
        ("verify over timeout", verify_over_timeout, True),
        ("verify after SIGTERM", verify_after_sigterm, True),
        ("reading runs code", reading_runs_code, False),
        ("newline accepted", newline_accepted, False),
        ("half-written batch", half_written_batch, False),
        ("setuid dropped", setuid_dropped, False),
        ("memory abort", memory_abort, False),
        ("temp files left", lambda base: temp_files_left(base, arguments.kills), False),
        ("hostfile hang", hostfile_hang, False),
        ("compile errors", compile_errors, False),
    ]
    wanted = {name.strip() for name in arguments.only.split(",") if name.strip()}
    has_torch = torch_available()
    total = 0
    print(f"{'probe':<22} {'count':>5}  {'seconds':>7}  detail")
    for name, probe, needs_torch in probes:
        if wanted and name not in wanted:
            continue
        if needs_torch and (arguments.skip_verify or not has_torch):
            print(f"{name:<22} {'n/a':>5}  {'':>7}  skipped ({'--skip-verify' if arguments.skip_verify else 'no torch'})")
            continue
        base = Path(tempfile.mkdtemp(prefix="migrate-attack-"))
        start = time.monotonic()
        try:
            count, detail = probe(base)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        total += count
        print(f"{name:<22} {count:>5}  {time.monotonic() - start:>7.1f}  {detail}", flush=True)
    print(f"{'total':<22} {total:>5}")


if __name__ == "__main__":
    main()
