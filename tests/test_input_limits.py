"""Input that CPython's compiler refuses is the user's error, said in CPython's words; a file whose
syntax tree would not fit in the memory left is refused with a message instead of aborting."""

from __future__ import annotations

import difflib
import io
import os
import random
import re
import resource
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from migrate import report
from migrate.cli import run
from migrate import DdpOptions
from migrate.sources import BYTES_PER_TOKEN, parse_memory

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "cases" / "main_function" / "input.py"
TRAINING = "import torch\n\nloss = torch.ones(1, requires_grad=True).sum()\nloss.backward()\n"

COMPILE_ERRORS = [
    ("return 3\n", 5, 1, "'return' outside function"),
    ("nonlocal other\n", 5, 1, "nonlocal declaration not allowed at module level"),
    ("break\n", 5, 1, "'break' outside loop"),
    ("def step(x, x):\n    return x\n", 5, 13, "duplicate argument 'x' in function definition"),
    ("*a, *b = [1, 2]\n", 5, 1, "multiple starred expressions in assignment"),
    ("def outer():\n    x = 1\n    def inner():\n        global x\n        nonlocal x\n", 8, 9,
     "name 'x' is nonlocal and global"),
]


@pytest.mark.parametrize("tail,line,col,message", COMPILE_ERRORS)
def test_what_only_cpythons_compiler_refuses_is_an_input_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
        tail: str, line: int, col: int, message: str) -> None:
    (tmp_path / "train.py").write_text(TRAINING + tail)
    monkeypatch.chdir(tmp_path)
    status = run("ddp", ["train.py"], DdpOptions(), write=False, check=False, report="text")
    err = capfd.readouterr().err
    assert status == 2
    assert f"train.py:{line}:{col}: syntax error: {message}" in err
    assert "internal error" not in err


def tokens(text: str) -> int:
    skipped = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    return sum(1 for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in skipped)


def test_the_memory_estimate_counts_tokens_as_python_does() -> None:
    text = SCRIPT.read_text()
    counted = parse_memory(text) // BYTES_PER_TOKEN
    assert 0.9 < counted / tokens(text) < 1.1
    literal = "TABLE = [" + ", ".join(str(i) for i in range(10_000)) + "]\n"
    assert parse_memory(literal) // BYTES_PER_TOKEN == tokens(literal)


LIMIT = 1200 * 1024 * 1024  # the conversion thread's stack alone reserves 512 MB of it


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def migrate_limited(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, preexec_fn=limited)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the process's size is read from /proc")
def test_a_file_too_big_for_the_memory_left_is_refused_not_aborted(tmp_path: Path) -> None:
    table = "TABLE = [" + ", ".join(str(i % 1000) for i in range(300_000)) + "]\n"
    (tmp_path / "big.py").write_text(SCRIPT.read_text() + table)
    result = migrate_limited("to-ddp", "big.py", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "big.py: parsing it would need about 1.7 GB, 0." in result.stderr
    assert "GB available (ulimit -v leaves it); left unchanged" in result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_an_ordinary_script_converts_under_the_same_limit(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT.read_text())
    result = migrate_limited("to-ddp", "--check", "train.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout == "train.py\n"


def apply(old: list[bytes], diff: list[bytes]) -> list[bytes]:
    """Apply unified-diff lines to `old`, checking every context and removed line."""
    new: list[bytes] = []
    at, k = 0, 2
    while k < len(diff):
        hunk = re.fullmatch(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n", diff[k])
        assert hunk, diff[k]
        start = int(hunk[1]) - (0 if hunk[2] == b"0" else 1)
        assert start >= at
        new += old[at:start]
        at, k = start, k + 1
        while k < len(diff) and not diff[k].startswith(b"@@"):
            tag, line = diff[k][:1], diff[k][1:]
            if tag in b" -":
                assert old[at] == line
                at += 1
            if tag in b" +":
                new.append(line)
            k += 1
    return new + old[at:]


def test_the_diff_turns_the_old_lines_into_the_new_ones() -> None:
    chance = random.Random(7)
    for _ in range(300):
        pool = [b"x\n", b"y\n", b"\n"] + [b"line %d\n" % i for i in range(chance.randint(1, 40))]
        old = [chance.choice(pool) for _ in range(chance.randint(0, 60))]
        new = list(old)
        for _ in range(chance.randint(0, 8)):
            where = chance.randint(0, len(new))
            action = chance.choice(("insert", "delete", "replace"))
            if action != "insert" and where < len(new):
                del new[where]
            if action != "delete":
                new.insert(where, chance.choice(pool))
        diff = report.unified_diff(old, new, b"a/t.py", b"b/t.py")
        assert apply(old, diff) == new
        assert (diff == []) == (old == new)


def test_the_diff_of_a_small_edit_is_the_one_difflib_gives() -> None:
    old = [b"import os\n", b"\n", b"def main():\n", b"    print(1)\n", b"    return 2\n"]
    new = [b"import os\n", b"import sys\n", b"\n", b"def main():\n", b"    print(1, file=sys.stderr)\n", b"    return 2\n"]
    expected = difflib.diff_bytes(difflib.unified_diff, old, new, b"a/t.py", b"b/t.py")
    assert report.unified_diff(old, new, b"a/t.py", b"b/t.py") == list(expected)


def test_diffing_a_file_with_thousands_of_edits_scans_it_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """difflib alone looked for the longest match in the whole rest of the file once per edit:
    quadratic. Counted in lines scanned, not timed."""
    scanned = [0]
    real = difflib.SequenceMatcher.find_longest_match

    def counting(self: difflib.SequenceMatcher, alo: int = 0, ahi: int | None = None, blo: int = 0,
                 bhi: int | None = None) -> difflib.Match:
        scanned[0] += (len(self.a) if ahi is None else ahi) - alo
        return real(self, alo, ahi, blo, bhi)  # type: ignore[arg-type]

    monkeypatch.setattr(difflib.SequenceMatcher, "find_longest_match", counting)
    old, new = [], []
    for i in range(3000):
        unit = [b"    h_%d = x.mean() * %d\n" % (i, i), b"    if h_%d > %d:\n" % (i, i), b"        print(h_%d)\n" % i]
        old += unit
        new += [unit[0], unit[1].replace(b":", b" and rank == 0:"), unit[2]]
    diff = report.unified_diff(old, new, b"a/t.py", b"b/t.py")
    assert apply(old, diff) == new
    assert scanned[0] <= 4 * len(old)
