"""Corpus runner: converts every script of the real-world corpus and, where its data can be had
offline, proves the conversion with `migrate verify`.

The corpus (../shared/corpus/README.md) is 70 training scripts by other people, laid out by
extract.sh in .corpus/scripts/<file> with their sibling modules in .corpus/siblings/<id>/. For each
row and each target this runner

1. converts the file with the library API (`migrate_source`) and classifies it: converted,
   unchanged (with the finding that decided it), crashed (an exception escaped migrate_source),
   internal error (an error result, or output that does not compile), bad input;
2. for a converted file marked runnable in benchmarks/corpus_runs.tsv, whose imports all resolve
   here, copies the script alone into a temporary folder (plus any files the table asks for) and
   runs `migrate verify --target T --fake-data --report json --steps 3 --timeout 180 --to-end
   --max-time 900 SCRIPT -- ARGS` there, with tests/shims and the row's siblings folder on
   PYTHONPATH, and records its JSON (`--steps-only`: without --to-end and --max-time;
   `--pretend-gpu`: every run with verify's --pretend-gpu, and the rows marked `gpu` run too);
3. counts, per target, the converted scripts verify ran to the end: every rank of the converted
   script ran it to completion (the report's `ran_to_end`), the row "ran to the end (--to-end)".

benchmarks/corpus_runs.tsv (tab-separated, '#' lines are comments) has one row per id:
    id        w001
    runnable  yes | gpu | no: whether the data can be had offline (torchvision datasets replaced by
              --fake-data, data made in the script, or files this runner writes) and the original
              runs on a CPU (`gpu`: only on a GPU, e.g. a hard-coded `.cuda()`, so it runs only with
              --pretend-gpu); decided by reading the script
    files     files to write beside the script before the run, e.g. `text:input.txt` (about
              200 kB of deterministic text); comma-separated
    args      extra script arguments that make it run fast on a CPU (shell-quoted)
    reason    why (for `no`, the reason reported as "cannot run offline")

Nothing is written outside temporary folders, except the file named by --out.

Run (from the repository root):
    .venv/bin/python benchmarks/corpus.py --no-verify              # conversion only, both targets
    .venv/bin/python benchmarks/corpus.py --target ddp --ids w009,w058
    .venv/bin/python benchmarks/corpus.py --markdown --out results.json
    .venv/bin/python benchmarks/corpus.py --pretend-gpu --target fsdp   # the GPU path, on the CPU
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib.util
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
import traceback
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a file from a checkout: `migrate` is the one beside it

from migrate import migrate_source  # noqa: E402
from migrate.project_files import read_from_disk  # noqa: E402
from migrate.records import InputError  # noqa: E402

TARGETS = ("ddp", "deepspeed", "fsdp", "horovod")
DEFAULT_MANIFEST = ROOT.parent / "shared" / "corpus" / "MANIFEST.tsv"
DEFAULT_CORPUS = ROOT / ".corpus"
RUNS_TABLE = Path(__file__).resolve().parent / "corpus_runs.tsv"
SHIMS = ROOT / "tests" / "shims"
VERIFY_STEPS = 3
VERIFY_TIMEOUT = 180  # seconds without progress that make a hang, passed to migrate verify
VERIFY_MAX_TIME = 900  # seconds a launch may work, to the end of the script (--max-time)
RAN_TO_END = "ran to the end (--to-end)"

# Outcomes, in the order the summary lists them.
VERIFIED = "verified"
VERIFY_FAILED = "converted, verify failed"
VERIFY_ERROR = "converted, verify could not run"
VERIFY_UNAVAILABLE = "converted, verify unavailable"
OFFLINE = "converted, cannot run offline"
CONVERTED = "converted (not verified)"
UNCHANGED = "unchanged with a finding"
CRASHED = "crashed"
INTERNAL = "internal error"
BAD_INPUT = "bad input"
OUTCOMES = (VERIFIED, VERIFY_FAILED, VERIFY_ERROR, VERIFY_UNAVAILABLE, OFFLINE, CONVERTED, UNCHANGED, CRASHED,
            INTERNAL, BAD_INPUT)


@dataclass(frozen=True)
class Row:
    """One line of MANIFEST.tsv (the columns this runner reads)."""

    id: str
    file: str
    kind: str
    needs: str
    data: str


@dataclass(frozen=True)
class RunSpec:
    """One line of corpus_runs.tsv."""

    mode: str  # yes | gpu | no (see the module's docstring)
    reason: str
    files: tuple[str, ...] = ()
    args: tuple[str, ...] = ()

    def runnable(self, pretend_gpu: bool) -> bool:
        return self.mode == "yes" or (self.mode == "gpu" and pretend_gpu)


@dataclass
class Record:
    """What happened to one file for one target."""

    id: str
    file: str
    kind: str
    target: str
    outcome: str = ""
    detail: str = ""  # the finding code, failed check, or reason behind the outcome
    codes: list[str] = field(default_factory=list)  # every finding code of the conversion
    message: str = ""
    convert_seconds: float = 0.0
    verify_seconds: float = 0.0
    verify_command: list[str] = field(default_factory=list)
    verify_report: dict | None = None
    ran_to_end: bool | None = None  # verify's `ran_to_end`: every converted rank ran the script to completion
    modules: list[str] = field(default_factory=list)  # the modules of its project the conversion edits too


# ---------------------------------------------------------------------------------------------
# Inputs


def read_manifest(path: Path) -> list[Row]:
    with open(path, encoding="utf-8", newline="") as stream:
        return [Row(r["id"], r["file"], r["kind"], r["needs"], r["data"]) for r in csv.DictReader(stream, delimiter="\t")]


def read_runs(path: Path) -> dict[str, RunSpec]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    runs = {}
    for r in csv.DictReader(lines, delimiter="\t"):
        runs[r["id"]] = RunSpec(
            mode=r["runnable"].strip().lower(),
            reason=r["reason"].strip(),
            files=tuple(f.strip() for f in (r["files"] or "").split(",") if f.strip()),
            args=tuple(shlex.split(r["args"] or "")),
        )
    return runs


def read_text(path: Path) -> str:
    """The file's text as the CLI reads it: its coding cookie honoured, line endings kept."""
    raw = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return raw.decode(encoding)


# ---------------------------------------------------------------------------------------------
# Conversion


def convert(row: Row, target: str, corpus: Path) -> tuple[Record, bool]:
    """Convert one file; (record, converted). The record's outcome is final unless converted."""
    record = Record(row.id, row.file, row.kind, target)
    path = corpus / "scripts" / row.file
    start = time.perf_counter()
    try:
        result = migrate_source(read_text(path), target, None, path=str(path), read_module=project_reader(row, corpus))
    except InputError as error:
        record.outcome, record.detail, record.message = BAD_INPUT, "input error", str(error)
        return record, False
    except Exception as error:  # noqa: BLE001 (the point is to catch what escapes)
        frames = traceback.extract_tb(error.__traceback__)
        ours = [f for f in frames if f"{os.sep}migrate{os.sep}" in f.filename] or frames
        first_line = (str(error).strip().splitlines() or [""])[0]
        record.outcome, record.detail = CRASHED, type(error).__name__
        record.message = f"{type(error).__name__}: {first_line} (in {Path(ours[-1].filename).name}:{ours[-1].lineno})"
        return record, False
    finally:
        record.convert_seconds = round(time.perf_counter() - start, 3)
    record.codes = [f.code for f in result.findings] + [f.code for m in result.modules for f in m.findings]
    record.modules = [os.path.relpath(m.path, path.parent) for m in result.modules if m.new != m.old]
    if result.error:
        record.outcome, record.detail = INTERNAL, deciding_code(result.findings) or "error result"
        record.message = "; ".join(f.message for f in result.findings)
        return record, False
    if result.skipped or not result.changed:
        record.outcome, record.detail = UNCHANGED, deciding_code(result.findings) or "no finding"
        record.message = "; ".join(f"{f.code} {f.message}" for f in result.findings)
        return record, False
    try:
        compile(result.new, str(path), "exec")
    except SyntaxError as error:
        record.outcome, record.detail = INTERNAL, "output does not compile"
        record.message = f"line {error.lineno}: {error.msg}"
        return record, False
    return record, True


def project_reader(row: Row, corpus: Path):  # type: ignore[no-untyped-def]
    """The script's own project as the conversion would see it beside the script: the modules of
    .corpus/siblings/<id>/ read as if they were in .corpus/scripts/ (issue 27)."""
    scripts, siblings = corpus / "scripts", corpus / "siblings" / row.id

    def read(path: str) -> str | None:
        relative = os.path.relpath(path, scripts)
        if relative.startswith(".."):
            return None
        return read_from_disk(str(siblings / relative))

    return read


def deciding_code(findings: Iterable) -> str:  # type: ignore[type-arg]
    """The finding that explains the outcome: one that says the file is left unchanged, else the
    most severe; the first of those."""
    rank = {"error": 0, "warning": 1, "note": 2}
    ordered = sorted(findings, key=lambda f: ("left unchanged" not in f.message,
                                              rank.get(getattr(f.severity, "value", f.severity), 3)))
    return ordered[0].code if ordered else ""


# ---------------------------------------------------------------------------------------------
# Can it run here?


def missing_packages(script: Path, siblings: Path) -> list[str]:
    """Top-level packages imported (outside try blocks and functions) by the script and the sibling
    modules it reaches that do not resolve in this interpreter."""
    missing: set[str] = set()
    seen: set[Path] = set()
    queue = [script]
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in module_level_imports(tree.body):
            for module, level in imported_modules(node):
                local = local_files(module, level, path, siblings)
                if local or level:
                    queue.extend(local)
                    continue
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top == "__future__":
                    continue
                if importlib.util.find_spec(top) is None:
                    missing.add(top)
    return sorted(missing)


def module_level_imports(body: list[ast.stmt]) -> Iterable[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            yield from module_level_imports(node.body)
            yield from module_level_imports(node.orelse)
        elif isinstance(node, ast.With):
            yield from module_level_imports(node.body)
        # try blocks hold optional imports; function and class bodies may never run


def imported_modules(node: ast.Import | ast.ImportFrom) -> list[tuple[str, int]]:
    if isinstance(node, ast.Import):
        return [(alias.name, 0) for alias in node.names]
    base = node.module or ""
    names = [(base, node.level)] if base else []
    return names + [(f"{base}.{alias.name}" if base else alias.name, node.level) for alias in node.names if alias.name != "*"]


def local_files(module: str, level: int, importer: Path, siblings: Path) -> list[Path]:
    """The sibling files an import names (each package level's __init__.py and the module)."""
    base = importer.parent
    for _ in range(max(level - 1, 0)):
        base = base.parent
    if not level:
        base = siblings
    parts = module.split(".") if module else []
    if not level and not (siblings / f"{parts[0]}.py").exists() and not (siblings / parts[0]).is_dir():
        return []
    files = []
    for i in range(1, len(parts) + 1):
        stem = base.joinpath(*parts[:i])
        files += [p for p in (stem.with_suffix(".py"), stem / "__init__.py") if p.is_file()]
    return files


def write_fixture(spec: str, folder: Path) -> None:
    """`text:NAME`: about 200 kB of deterministic English-like text (for char-level models)."""
    kind, _, name = spec.partition(":")
    if kind != "text" or not name or Path(name).is_absolute() or ".." in Path(name).parts:
        raise ValueError(f"unknown fixture {spec!r} (write text:NAME)")
    words = ("the king and queen of a small land spoke to their people about bread wine war and peace "
             "while the river ran past old walls and young men sang songs of home").split()
    lines, state = [], 12345
    for line in range(4000):
        count = 6 + line % 5
        chosen = []
        for _ in range(count):
            state = (state * 1103515245 + 12345) % 2**31
            chosen.append(words[state % len(words)])
        lines.append(" ".join(chosen).capitalize() + ("." if line % 3 else ","))
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Verification


def verify_available() -> tuple[bool, str]:
    try:
        probe = subprocess.run([sys.executable, "-m", "migrate", "verify", "--help"], capture_output=True, text=True,
                               timeout=120, env=child_environment(None), cwd=tempfile.gettempdir())
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, str(error)
    if probe.returncode != 0:
        return False, (probe.stderr.strip().splitlines() or ["`migrate verify --help` failed"])[-1]
    return True, ""


def child_environment(siblings: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(SHIMS)] + ([str(siblings)] if siblings and siblings.is_dir() else []) + [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg", WANDB_MODE="disabled", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1")
    return env


def verify(record: Record, row: Row, spec: RunSpec, corpus: Path, to_end: bool = True, pretend_gpu: bool = False,
           max_time: int = VERIFY_MAX_TIME) -> None:
    """Run `migrate verify` on one converted file in a temporary folder (`to_end`: to the end of the
    script); fill the record's outcome."""
    siblings = corpus / "siblings" / row.id
    start = time.perf_counter()
    limit = 2 * (max_time + 60) + 120  # the whole verify command: two launches and slack
    with tempfile.TemporaryDirectory(prefix=f"corpus-{row.id}-{record.target}-") as folder:
        script = Path(folder) / row.file
        if siblings.is_dir():  # the project beside the script, as it is laid out in its repository
            shutil.copytree(siblings, folder, dirs_exist_ok=True)
        shutil.copyfile(corpus / "scripts" / row.file, script)
        for fixture in spec.files:
            write_fixture(fixture, Path(folder))
        command = [sys.executable, "-m", "migrate", "verify", "--target", record.target, "--fake-data",
                   "--report", "json", "--steps", str(VERIFY_STEPS), "--timeout", str(VERIFY_TIMEOUT),
                   *(["--to-end", "--max-time", str(max_time)] if to_end else []),
                   *(["--pretend-gpu"] if pretend_gpu else []), script.name, "--", *spec.args]
        record.verify_command = command[1:]
        try:
            result = subprocess.run(command, cwd=folder, env=child_environment(siblings), capture_output=True,
                                    text=True, errors="replace", timeout=limit)
        except subprocess.TimeoutExpired:
            record.outcome, record.detail = VERIFY_ERROR, "timed out"
            record.message = f"migrate verify ran past {limit} s"
            return
        finally:
            record.verify_seconds = round(time.perf_counter() - start, 1)
    report = parse_report(result.stdout)
    record.verify_report = report
    if report is None:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        if "No such command" in result.stderr:
            record.outcome, record.detail = VERIFY_UNAVAILABLE, "no verify command"
        elif "Traceback (most recent call last)" in result.stderr:
            record.outcome, record.detail = VERIFY_ERROR, f"migrate verify crashed (exit {result.returncode})"
        else:
            record.outcome, record.detail = VERIFY_ERROR, f"no JSON report (exit {result.returncode})"
        record.message = tail[:300]
        return
    record.message = str(report.get("message", ""))[:300]
    record.ran_to_end = report.get("ran_to_end")
    status = report.get("status")
    if result.returncode == 0 and status == "passed":
        record.outcome, record.detail = VERIFIED, ""
    elif result.returncode == 1 or status == "failed":
        failed = [c.get("name", "?") for c in report.get("checks", []) if c.get("status") == "failed"]
        record.outcome, record.detail = VERIFY_FAILED, ", ".join(failed) or "no failed check named"
    else:
        record.outcome, record.detail = VERIFY_ERROR, short_reason(record.message)


def parse_report(stdout: str) -> dict | None:
    text = stdout.strip()
    for start in (0, text.find("\n{") + 1 if "\n{" in text else -1):
        if start < 0:
            continue
        try:
            report = json.loads(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(report, dict) and "status" in report:
            return report
    return None


def short_reason(message: str) -> str:
    """The first clause of a verify message, short enough to count outcomes by."""
    head = message.split(":")[0].split(";")[0].strip()
    if len(head) > 80:
        head = head[:80].rsplit(" ", 1)[0] + "..."
    return head or "no message"


# ---------------------------------------------------------------------------------------------
# Driver


def run_corpus(rows: list[Row], targets: list[str], runs: dict[str, RunSpec], corpus: Path, verify_runs: bool,
               jobs: int, progress: bool = True, to_end: bool = True, pretend_gpu: bool = False,
               max_time: int = VERIFY_MAX_TIME) -> list[Record]:
    records: list[Record] = []
    pending: list[tuple[Record, Row, RunSpec]] = []
    for target in targets:
        for row in rows:
            record, converted = convert(row, target, corpus)
            records.append(record)
            if not converted:
                continue
            spec = runs.get(row.id, RunSpec("no", "not in corpus_runs.tsv"))
            runnable = spec.runnable(pretend_gpu)
            missing = missing_packages(corpus / "scripts" / row.file, corpus / "siblings" / row.id) if runnable else []
            if not runnable or missing:
                record.outcome = OFFLINE
                record.detail = spec.reason if not runnable else "missing package: " + ", ".join(missing)
                continue
            if not verify_runs:
                record.outcome, record.detail = CONVERTED, "runnable offline"
                continue
            pending.append((record, row, spec))
    if pending:
        available, why = verify_available()
        if not available:
            for record, _, _ in pending:
                record.outcome, record.detail, record.message = VERIFY_UNAVAILABLE, "no verify command", why
        else:
            def one(task: tuple[Record, Row, RunSpec]) -> None:
                record, row, spec = task
                verify(record, row, spec, corpus, to_end, pretend_gpu, max_time)
                if progress:
                    print(f"  {record.target:9} {record.id}  {record.outcome}  {record.detail}  ({record.verify_seconds} s)",
                          file=sys.stderr, flush=True)

            with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
                list(pool.map(one, pending))
    return records


def summary(records: list[Record], targets: list[str]) -> dict[str, dict[str, Counter]]:
    """outcome -> target -> Counter(detail)."""
    table: dict[str, dict[str, Counter]] = {o: {t: Counter() for t in targets} for o in OUTCOMES}
    for record in records:
        detail = record.detail or ""
        if detail.startswith("missing package"):
            detail = "missing package"  # which ones: the per-file table
        table[record.outcome][record.target][detail] += 1
    return table


def cell(details: Counter) -> str:
    total = sum(details.values())
    if not total:
        return "0"
    named = [f"{name} {count}" for name, count in sorted(details.items(), key=lambda kv: (-kv[1], kv[0])) if name]
    return f"{total} ({', '.join(named)})" if named else str(total)


def render_summary(records: list[Record], targets: list[str], markdown: bool) -> str:
    table = summary(records, targets)
    rows = [(outcome, [cell(table[outcome][t]) for t in targets]) for outcome in OUTCOMES
            if any(table[outcome][t] for t in targets)]
    totals = ["files", [str(sum(1 for r in records if r.target == t)) for t in targets]]
    ended = [RAN_TO_END, [str(ran_to_end(records, t)) for t in targets]]
    if markdown:
        lines = ["| outcome | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
        lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in [*rows, ended, totals]]
        return "\n".join(lines)
    lines = []
    for target in targets:
        lines.append(f"{target}: {sum(1 for r in records if r.target == target)} files")
        lines.append(f"  {RAN_TO_END:52} {ran_to_end(records, target):3}")
        for outcome in OUTCOMES:
            details = table[outcome][target]
            if details:
                lines.append(f"  {outcome:52} {sum(details.values()):3}")
                lines += [f"      {name:48} {count:3}" for name, count in sorted(details.items(), key=lambda kv: (-kv[1], kv[0]))
                          if name]
    return "\n".join(lines)


def ran_to_end(records: list[Record], target: str) -> int:
    """How many converted scripts of `target` verify ran to the end (on every rank)."""
    return sum(1 for r in records if r.target == target and r.ran_to_end)


def render_files(records: list[Record], targets: list[str], markdown: bool) -> str:
    by_id: dict[str, dict[str, Record]] = {}
    for record in records:
        by_id.setdefault(record.id, {})[record.target] = record

    def describe(record: Record | None) -> str:
        if record is None:
            return "-"
        text = record.outcome + (f": {record.detail}" if record.detail else "")
        text += ", ran to the end" if record.ran_to_end else ""
        text += f", with {len(record.modules)} module{'s' if len(record.modules) != 1 else ''}" if record.modules else ""
        warnings = [c for c in dict.fromkeys(record.codes) if c != record.detail]
        text += f" [{' '.join(warnings)}]" if warnings else ""
        if record.outcome in (CRASHED, INTERNAL, BAD_INPUT, VERIFY_ERROR) and record.message:
            text += f" -- {' '.join(record.message.split())[:160]}"
        return text

    if markdown:
        lines = ["| id | kind | " + " | ".join(targets) + " |", "|---|---|" + "---|" * len(targets)]
        for rid, per_target in by_id.items():
            kind = next(iter(per_target.values())).kind
            lines.append(f"| {rid} | {kind} | " + " | ".join(describe(per_target.get(t)).replace("|", "\\|") for t in targets) + " |")
        return "\n".join(lines)
    lines = []
    for target in targets:
        lines.append(f"{target}:")
        for rid, per_target in by_id.items():
            record = per_target.get(target)
            if record is not None:
                lines.append(f"  {rid}  {record.kind:19} {describe(record)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=[*TARGETS, "all"], default="all")
    parser.add_argument("--ids", default="", help="comma-separated ids (default: every row)")
    parser.add_argument("--no-verify", action="store_true", help="convert and classify only; run nothing")
    parser.add_argument("--jobs", type=int, default=1, help="verify runs at a time (default 1)")
    parser.add_argument("--steps-only", action="store_true", help="verify only the first steps, not --to-end")
    parser.add_argument("--max-time", type=int, default=VERIFY_MAX_TIME,
                        help=f"seconds each launch may work with --to-end (default {VERIFY_MAX_TIME})")
    parser.add_argument("--pretend-gpu", action="store_true",
                        help="verify with --pretend-gpu (the GPU path on the CPU); rows marked `gpu` run too")
    parser.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    parser.add_argument("--out", help="write every record (with verify's JSON) to this file")
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="the folder extract.sh filled")
    parser.add_argument("--runs", type=Path, default=RUNS_TABLE)
    options = parser.parse_args(argv)

    rows = read_manifest(options.manifest)
    if options.ids:
        wanted = {i.strip() for i in options.ids.split(",") if i.strip()}
        unknown = wanted - {r.id for r in rows}
        if unknown:
            parser.error(f"unknown ids: {', '.join(sorted(unknown))}")
        rows = [r for r in rows if r.id in wanted]
    absent = [r.file for r in rows if not (options.corpus / "scripts" / r.file).is_file()]
    if absent:
        parser.error(f"{len(absent)} corpus files are missing under {options.corpus}/scripts (run extract.sh): {absent[0]}...")
    targets = list(TARGETS) if options.target == "all" else [options.target]
    start = time.perf_counter()
    records = run_corpus(rows, targets, read_runs(options.runs), options.corpus, not options.no_verify, options.jobs,
                         to_end=not options.steps_only, pretend_gpu=options.pretend_gpu, max_time=options.max_time)
    print(render_summary(records, targets, options.markdown))
    print()
    print(render_files(records, targets, options.markdown))
    print(f"\n{len(rows)} files x {len(targets)} targets in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if options.out:
        Path(options.out).write_text(json.dumps([asdict(r) for r in records], indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
