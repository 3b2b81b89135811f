"""Same output before and after a change: converts every corpus script and every golden input to
every target at two git revisions and compares what each writes (the new text, each artifact's path
and text, the findings), byte for byte. For refactors that must not change behaviour.

Each revision is checked out in a temporary worktree (the repository itself is not touched) and
converted by that revision's own code in a subprocess (`migrate.api.migrate_file`, which reads
the modules of the script's folder as the command line does). Prints one line per difference and
the counts; exit 1 when anything differs.

Run (from the repository root; the corpus comes from ../shared/corpus/extract.sh):
    .venv/bin/python benchmarks/same_output.py efcd5d6 HEAD
    .venv/bin/python benchmarks/same_output.py HEAD~1 HEAD --no-corpus      # golden inputs only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("ddp", "fsdp", "deepspeed", "horovod", "dp")

# what runs inside each worktree: converts the files named on stdin, prints one JSON line per result
CONVERT = r"""
import hashlib, json, sys
from migrate.api import migrate_file
from migrate import InputError  # the public name: the same in every revision

def digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]

for line in sys.stdin:
    path, target = json.loads(line)
    try:
        outcome = migrate_file(path, target)
    except Exception as error:  # an options error or a crash: recorded, compared like the rest
        print(json.dumps([path, target, f"raised {type(error).__name__}"]))
        continue
    if isinstance(outcome, InputError):
        print(json.dumps([path, target, f"error {outcome}"]))
        continue
    artifacts = sorted((a.path, digest(a.text)) for a in outcome.artifacts)
    findings = [(f.code, f.line, f.col, digest(f.message)) for f in outcome.findings]
    print(json.dumps([path, target, [digest(outcome.new), artifacts, findings]]))
"""


def files(corpus: bool) -> list[Path]:
    found = sorted((ROOT / "tests" / "cases").glob("*/input.py"))
    if corpus:
        found += sorted((ROOT / ".corpus" / "scripts").glob("*.py"))
    return found


def outputs(revision: str, paths: list[Path], folder: Path) -> dict[tuple[str, str], object]:
    tree = folder / revision.replace("/", "_")
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), revision], cwd=ROOT, check=True)
    try:
        lines = "".join(json.dumps([str(p), t]) + "\n" for p in paths for t in TARGETS)
        done = subprocess.run([sys.executable, "-c", CONVERT], input=lines, capture_output=True, text=True,
                              cwd=tree, check=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)
    return {(path, target): value for path, target, value in map(json.loads, done.stdout.splitlines())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--no-corpus", action="store_true", help="golden inputs only")
    args = parser.parse_args()
    paths = files(not args.no_corpus)
    with tempfile.TemporaryDirectory() as folder:
        before = outputs(args.before, paths, Path(folder))
        after = outputs(args.after, paths, Path(folder))
    differ = sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))
    for path, target in differ:
        print(f"differs: {Path(path).relative_to(ROOT)} to-{target}")
    digest = hashlib.sha256(json.dumps(sorted(after.items())).encode()).hexdigest()[:12]
    print(f"{len(paths)} files x {len(TARGETS)} targets: {len(before) - len(differ)} identical, {len(differ)} differ "
          f"(outputs of {args.after}: {digest})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
