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
    .venv/bin/python benchmarks/same_output.py HEAD WORKTREE               # the uncommitted change
Corpus scripts are converted with their own repository's modules beside them (.corpus/siblings/<id>/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("ddp", "fsdp", "deepspeed", "horovod", "dp")

# what runs inside each worktree: converts the files named on stdin, prints one JSON line per result
CONVERT = r"""
import hashlib, json, os, sys
from migrate.api import migrate_file
from migrate import InputError  # the public name: the same in every revision

def digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]

def local(name, folder):  # a path as seen from the script's folder: the same in every layout
    return os.path.relpath(name, folder) if os.path.isabs(name) else name

def compared(outcome, folder):
    artifacts = sorted((local(a.path, folder), digest(a.text)) for a in outcome.artifacts)
    findings = [(f.code, f.line, f.col, digest(f.message)) for f in outcome.findings]
    modules = [(local(m.path, folder), compared(m, folder)) for m in getattr(outcome, "modules", ())]
    return [digest(outcome.new), artifacts, findings] + ([modules] if modules else [])

for line in sys.stdin:
    path, target = json.loads(line)
    folder = os.path.dirname(path)
    try:
        outcome = migrate_file(path, target)
    except Exception as error:  # an options error or a crash: recorded, compared like the rest
        print(json.dumps([path, target, f"raised {type(error).__name__}"]))
        continue
    if isinstance(outcome, InputError):
        print(json.dumps([path, target, "error " + str(outcome).replace(folder + os.sep, "")]))
        continue
    print(json.dumps([path, target, compared(outcome, folder)]))
"""


WORKTREE = "WORKTREE"  # as a revision: the working tree as it is, uncommitted changes included


def files(corpus: bool, folder: Path) -> list[Path]:
    """The golden inputs, and each corpus script laid out in `folder` with the modules of its own
    repository beside it (.corpus/siblings/<id>/), as the script sees them where it lives: a
    conversion that joins or reads those modules (issue 27) is compared with them."""
    found = sorted((ROOT / "tests" / "cases").glob("*/input.py"))
    if corpus:
        for script in sorted((ROOT / ".corpus" / "scripts").glob("*.py")):
            place = folder / "corpus" / script.name.split("__")[0]
            siblings = ROOT / ".corpus" / "siblings" / place.name
            if siblings.is_dir():
                shutil.copytree(siblings, place)
            place.mkdir(parents=True, exist_ok=True)
            shutil.copy(script, place / script.name)
            found.append(place / script.name)
    return found


def shown(path: Path, folder: Path) -> str:
    """A compared file as the output names it: a golden input from the root, a corpus script as `corpus/<id>/<file>`."""
    return str(path.relative_to(folder) if path.is_relative_to(folder) else path.relative_to(ROOT))


def outputs(revision: str, paths: list[Path], folder: Path) -> dict[tuple[str, str], object]:
    lines = "".join(json.dumps([str(p), t]) + "\n" for p in paths for t in TARGETS)
    if revision == WORKTREE:
        done = subprocess.run([sys.executable, "-c", CONVERT], input=lines, capture_output=True, text=True,
                              cwd=ROOT, check=True)
    else:
        tree = folder / revision.replace("/", "_")
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), revision], cwd=ROOT, check=True)
        try:
            done = subprocess.run([sys.executable, "-c", CONVERT], input=lines, capture_output=True, text=True,
                                  cwd=tree, check=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)
    return {(path, target): value for path, target, value in map(json.loads, done.stdout.splitlines())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="a git revision, or WORKTREE")
    parser.add_argument("after", help="a git revision, or WORKTREE")
    parser.add_argument("--no-corpus", action="store_true", help="golden inputs only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        paths = files(not args.no_corpus, folder)
        before = outputs(args.before, paths, folder)
        after = outputs(args.after, paths, folder)
        differ = sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))
        for path, target in differ:
            print(f"differs: {shown(Path(path), folder)} to-{target}")
        named = sorted((shown(Path(path), folder), target, value) for (path, target), value in after.items())
    digest = hashlib.sha256(json.dumps(named).encode()).hexdigest()[:12]
    print(f"{len(paths)} files x {len(TARGETS)} targets: {len(before) - len(differ)} identical, {len(differ)} differ "
          f"(outputs of {args.after}: {digest})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
