"""Launches in the tests fail for what is wrong, not for a busy machine: tests/progress.py stops a
launch when its whole process tree says nothing and uses no CPU for the quiet limit, and only then
(or past the ceiling); tests/conftest.py stops a session before any launch would build DeepSpeed's
op (missing, or stale for the ninja on PATH)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DEEPSPEED_OP, deepspeed_op_problem
from tests.progress import Launch, LaunchTimeout, run, run_together

PYTHON = sys.executable
QUIET_S = 0.6


def python(code: str) -> list[str]:
    return [PYTHON, "-c", code]


def burn(seconds: float) -> str:
    """Code that uses the CPU, silently, for `seconds` of wall time."""
    return f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    sum(range(1000))\n"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_silent_sleeping_process_is_a_hang_and_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time\nprint('started', flush=True)\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)"
    began = time.monotonic()
    with pytest.raises(LaunchTimeout) as stopped:
        run(python(code), quiet_s=QUIET_S)
    assert stopped.value.kind == "hang"
    assert f"hang: no output and no CPU for {QUIET_S:g} s" in str(stopped.value)
    assert "started" in str(stopped.value)  # the last output comes with it
    assert time.monotonic() - began < 10
    assert not alive(int(pid_file.read_text()))


def test_a_sleeping_grandchild_under_a_waiting_shell_is_a_hang(tmp_path: Path) -> None:
    """The tree, not just the process started: bash waits (no CPU) for a sleep that has left the
    session (setsid), and both are killed."""
    pid_file = tmp_path / "pid"
    with pytest.raises(LaunchTimeout, match="hang: no output and no CPU"):
        run(["bash", "-c", f"setsid sleep 60 & echo $! > {pid_file}; wait"], quiet_s=QUIET_S)
    assert not alive(int(pid_file.read_text()))


def test_a_process_that_burns_cpu_silently_is_not_a_hang() -> None:
    done = run(python(burn(2.5 * QUIET_S) + "print('finished')"), quiet_s=QUIET_S)
    assert (done.returncode, done.stdout) == (0, "finished\n")


def test_cpu_burnt_by_a_grandchild_counts_for_the_tree() -> None:
    """bash waits without CPU while its child, in a session of its own, computes."""
    done = run(["bash", "-c", f"setsid {PYTHON} -c '{burn(2.5 * QUIET_S)}'; echo finished"], quiet_s=QUIET_S)
    assert (done.returncode, done.stdout) == (0, "finished\n")


def test_a_process_that_prints_slowly_is_not_a_hang() -> None:
    code = f"import sys, time\nfor i in range(6):\n    print(i, flush=True)\n    time.sleep({QUIET_S / 2})\nsys.exit(3)"
    done = run(python(code), quiet_s=QUIET_S)
    assert done.returncode == 3  # the exit status comes back as it is
    assert done.stdout.split() == [str(i) for i in range(6)]


def test_a_watched_file_that_grows_is_output(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    code = f"import time\nfor i in range(6):\n    open({str(log)!r}, 'a').write('line\\n')\n    time.sleep({QUIET_S / 2})"
    assert run(python(code), quiet_s=QUIET_S, watch=[log]).returncode == 0


def test_working_past_the_ceiling_is_told_apart_from_a_hang() -> None:
    with pytest.raises(LaunchTimeout) as stopped:
        run(python("print('busy', flush=True)\n" + burn(60)), quiet_s=QUIET_S, ceiling_s=2 * QUIET_S)
    assert stopped.value.kind == "ceiling"
    assert f"still working after the ceiling of {2 * QUIET_S:g} s" in str(stopped.value) and "busy" in str(stopped.value)


def test_launches_run_together_and_each_keeps_its_own_output() -> None:
    """Two nodes of one job: one waits silently for the other, which is working; neither is a hang."""
    waiter = Launch(python(f"import time\ntime.sleep({2.5 * QUIET_S})\nprint('node 0')"), env={**os.environ, "NODE": "0"})
    worker = Launch(python(burn(2.5 * QUIET_S) + "import os\nprint('node', os.environ['NODE'])"), env={**os.environ, "NODE": "1"})
    done = run_together([waiter, worker], quiet_s=QUIET_S)
    assert [(d.returncode, d.stdout) for d in done] == [(0, "node 0\n"), (0, "node 1\n")]


# tests/conftest.py: no launch builds DeepSpeed's op; the session stops before it would.

def built_op(extensions: Path) -> Path:
    """A stand-in for DeepSpeed's op folder, built for real by the ninja on PATH."""
    source = extensions / "shm.cpp"
    source.write_text("int shm;\n")
    folder = extensions / DEEPSPEED_OP
    folder.mkdir()
    (folder / "build.ninja").write_text(f"rule copy\n  command = cp $in $out\nbuild {DEEPSPEED_OP}.so: copy {source}\n")
    subprocess.run(["ninja", "-C", str(folder)], check=True, capture_output=True)
    return folder


def test_the_suite_s_own_bin_folder_is_first_on_path() -> None:
    assert os.environ["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert Path(os.environ["TORCH_EXTENSIONS_DIR"]).is_absolute()


def test_a_missing_op_stops_the_session(tmp_path: Path) -> None:
    assert "not built in" in str(deepspeed_op_problem(tmp_path))


def test_an_op_built_by_the_ninja_on_path_passes(tmp_path: Path) -> None:
    built_op(tmp_path)
    assert deepspeed_op_problem(tmp_path) is None


def test_an_op_built_by_another_ninja_is_stale_and_left_as_it_was(tmp_path: Path) -> None:
    """A build log in another ninja's format (v5: ninja 1.11's; .venv's 1.13 writes v6) is
    discarded by the ninja on PATH, which would build everything again."""
    folder = built_op(tmp_path)
    log = folder / ".ninja_log"
    other = re.sub(r"^# ninja log v\d+", "# ninja log v4", log.read_text())
    log.write_text(other)
    assert "is stale (" in str(deepspeed_op_problem(tmp_path))
    assert log.read_text() == other  # the dry run ran on a copy


def test_a_source_newer_than_the_op_is_stale(tmp_path: Path) -> None:
    built_op(tmp_path)
    later = time.time() + 5
    os.utime(tmp_path / "shm.cpp", (later, later))
    assert "is stale (" in str(deepspeed_op_problem(tmp_path))
