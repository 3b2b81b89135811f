"""Every write a rank makes is seen, whatever function makes it, with the line of the user's code.

Fast: the `rank_zero` check on hand-made records (which writes it lists, in words). Slow: the
runner in one process on a script that writes in every way (its record says what and where), and
`migrate verify` on tests/verify/scripts/writes_train.py with a DDP conversion that reports on
every rank (sys.stdout.write, Path.write_text, np.save, PIL's Image.save, an append in a module
of the script's folder) and with the right one (rank 0 only).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.verify.checks import Launch, RankRecord, Source, check_rank_zero

SCRIPTS = Path(__file__).parent / "scripts"
ROOT = Path(__file__).resolve().parents[2]
SOURCE = Source("train.py", "import os\nos.makedirs('out', exist_ok=True)\nsave()\nprint('x')\n")


def launch(*events: dict) -> Launch:
    records = {rank: RankRecord(rank, [{"kind": "start", "root": "/w"}, *events], "") for rank in (0, 1)}
    return Launch(returncode=0, output="", records=records, timed_out=False)


def test_rank_zero_lists_each_kind_of_write_and_output_with_its_line() -> None:
    check = check_rank_zero(launch(
        {"kind": "write", "op": "append", "path": "/w/metrics.log", "where": "helper.py:5"},
        {"kind": "write", "op": "rename", "path": "/w/model.pt", "where": "train.py:3"},
        {"kind": "print", "text": "epoch 1", "where": "train.py:4", "stream": "stdout"},
        {"kind": "output", "text": "from a subprocess", "where": "train.py:3", "stream": "stderr"},
    ), (), SOURCE, SOURCE)
    assert check.status == "failed"
    assert check.detail == [
        "rank 1 appended to metrics.log at helper.py:5",
        "rank 1 renamed a file to model.pt at train.py:3: `save()`",
        "rank 1 printed 'epoch 1' at train.py:4: `print('x')`",
        "rank 1 printed 'from a subprocess' (not through sys.stderr: a subprocess or native code) at train.py:3: `save()`",
    ]


def test_folders_made_on_every_rank_and_output_of_no_user_line_are_not_failures() -> None:
    check = check_rank_zero(launch(
        {"kind": "write", "op": "mkdir", "path": "/w/out", "where": "train.py:2"},
        {"kind": "write", "op": "create", "path": "/tmp/tmpab12", "where": "train.py:3"},
        {"kind": "output", "text": "[Gloo] Rank 1 is connected", "where": None, "stream": "stderr"},
    ), (), SOURCE, SOURCE)
    assert check.status == "passed", check.detail


# -- the runner, one process -----------------------------------------------------------------------
EVERY_WRITE = '''\
import os, subprocess, sys
from pathlib import Path
import numpy as np
from PIL import Image
import helper
print("printed", 1)
sys.stdout.write("written\\n")
sys.stdout.buffer.write(b"bytes\\n")
os.system("echo from-system")
subprocess.run([sys.executable, "-c", "print('from-child')"])
Path("text.txt").write_text("x")
np.save("array.npy", np.zeros(2))
Image.new("L", (2, 2)).save("image.png")
helper.append("log.txt")
os.makedirs("out", exist_ok=True)
os.replace("text.txt", "moved.txt")
'''


@pytest.mark.slow
def test_the_runner_records_every_write_with_the_user_s_line(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(EVERY_WRITE)
    (tmp_path / "helper.py").write_text('def append(path):\n    with open(path, "a") as log:\n        log.write("y")\n')
    records = tmp_path.parent / f"{tmp_path.name}-records"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.run([sys.executable, "-m", "migrate.verify.runner", "--record", str(records), "--root",
                              str(tmp_path), "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert process.returncode == 0, process.stderr
    for line in ("printed 1", "written", "bytes", "from-system", "from-child"):
        assert line in process.stdout  # everything still reaches the launcher
    events = [json.loads(line) for line in (records / "rank0.jsonl").read_text().splitlines()]
    said = {(e["kind"], e["text"], e["where"]) for e in events if e["kind"] in ("print", "output")}
    assert {("print", "printed 1", "script.py:6"), ("print", "written", "script.py:7"), ("print", "bytes", "script.py:8"),
            ("output", "from-system", "script.py:9"), ("output", "from-child", "script.py:10")} <= said
    wrote = {(e["op"], os.path.basename(e["path"]), e["where"]) for e in events if e["kind"] == "write"}
    assert {("write", "text.txt", "script.py:11"), ("write", "array.npy", "script.py:12"),
            ("write", "image.png", "script.py:13"), ("append", "log.txt", "helper.py:2"),
            ("mkdir", "out", "script.py:15"), ("rename", "moved.txt", "script.py:16")} <= wrote


# -- through `migrate verify` ------------------------------------------------------------------
RIGHT = (SCRIPTS / "writes_train_ddp.py").read_text()
ON_EVERY_RANK = RIGHT.replace("if step == 1 and dist.get_rank() == 0:", "if step == 1:")


def verify(folder: Path, converted: str) -> tuple[int, dict]:
    shutil.copy(SCRIPTS / "writes_train.py", folder / "train.py")
    shutil.copy(SCRIPTS / "writes_helper.py", folder / "writes_helper.py")
    (folder / "converted.py").write_text(converted)
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", "--converted",
               str(folder / "converted.py"), str(folder / "train.py")]
    process = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert process.stdout, process.stderr
    return process.returncode, json.loads(process.stdout)


def detail(report: dict, name: str) -> list[str]:
    return next(c["detail"] for c in report["checks"] if c["name"] == name)


@pytest.mark.slow
def test_verify_names_every_write_made_on_every_rank(tmp_path: Path) -> None:
    assert ON_EVERY_RANK != RIGHT
    code, report = verify(tmp_path, ON_EVERY_RANK)
    assert code == 1, json.dumps(report, indent=1)
    seen = "\n".join(detail(report, "rank_zero"))
    assert "rank 1 printed 'step 1 weight norm" in seen and "at train.py:20: `sys.stdout.write(" in seen
    assert "rank 1 wrote summary.txt at train.py:21: `Path(\"summary.txt\").write_text(" in seen
    assert "rank 1 wrote weights.npy at train.py:22: `np.save(" in seen
    assert "rank 1 wrote weights.png at train.py:23: `Image.fromarray(" in seen
    assert "rank 1 appended to metrics.log at writes_helper.py:5" in seen


@pytest.mark.slow
def test_verify_passes_writes_made_on_rank_zero_only(tmp_path: Path) -> None:
    code, report = verify(tmp_path, RIGHT)
    assert code == 0, json.dumps(report, indent=1)
    assert detail(report, "rank_zero") == ["no other rank printed, logged or wrote a file"]


def test_the_user_s_frame_is_a_file_inside_the_root_not_beside_it() -> None:
    from migrate.verify.writes import user_frame

    here = Path(__file__).resolve()
    frame = sys._getframe()
    assert user_frame(frame, str(here.parent), "/nowhere") == f"{here.name}:{frame.f_lineno}"
    assert user_frame(frame, str(here.parent)[:-1], "/nowhere", within=1) is None  # "tests/verif" is not the folder


def test_multiprocessing_private_folders_are_not_the_scripts_writes(tmp_path: Path) -> None:
    """A DataLoader with workers makes multiprocessing create and remove a `pymp-*` folder in the
    temporary folder in every rank: not a file the script writes (it was a false rank_zero alarm
    on a real script)."""
    import multiprocessing.util
    import tempfile

    from migrate.verify.writes import Budget, WriteWatch

    class Recorder:
        root, folder = str(tmp_path), str(tmp_path / "records")
        events: list[tuple[str, dict[str, object]]] = []

        def event(self, kind: str, **fields: object) -> None:
            self.events.append((kind, fields))

    recorder = Recorder()
    watch = WriteWatch(recorder, Budget(recorder))
    private = multiprocessing.util.get_temp_dir()
    assert private.startswith(os.path.join(tempfile.gettempdir(), "pymp-"))
    # both opened for writing from a line of the user's script
    user_line = compile("watch('open', (path, 'w', 0))", str(tmp_path / "train.py"), "exec")
    for path in (os.path.join(private, "listener-abc"), str(tmp_path / "out.txt")):
        exec(user_line, {"watch": watch, "path": path})
    assert [fields["path"] for kind, fields in recorder.events if kind == "write"] == [str(tmp_path / "out.txt")]
