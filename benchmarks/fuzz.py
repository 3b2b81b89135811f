"""Fuzz figures for the conversion: nothing lost, nothing injected, nothing hangs. Printed, not asserted.

Inputs:
1. Fuzzed scripts, generated deterministically (seeded) by mutating this project's own inputs
   (tests/cases/*/input.py, samples/*/train.py): imports moved late, into the middle, above
   `if __name__`, into functions or `try` blocks; training moved to module level or into main();
   statements duplicated, deleted or swapped; the loop wrapped in a function; variables renamed
   (to names the conversion itself uses, to unicode names); `global`; deep nesting; star-imports.
2. Python files of the virtual environment's site-packages: those that call `.backward(`, then
   others spread across packages.

Each file is converted to every target with `migrate.api.migrate_source` and counted: crashes (an
exception other than InputError), hangs (over --timeout seconds), outputs that do not compile,
outputs that read a name before binding it (migrate.unbound, output against input), outputs with
another number of `.backward(` calls than the input (a statement lost), and non-idempotent
conversions (converting the output again changes it). A MIG901 result (the conversion caught its
own bad output and left the file untouched) is counted under its kind.

Run: .venv/bin/python benchmarks/fuzz.py [--count 2000] [--limit 500] [--seed 0] [--jobs 2]
     (--count 0 or --limit 0 leaves that part out; --examples N shows N examples per column)
"""

from __future__ import annotations

import argparse
import ast
import copy
import multiprocessing
import random
import signal
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from migrate.records import InputError  # noqa: E402
from migrate.unbound import introduced_unbound_names  # noqa: E402

TARGETS = ("ddp", "deepspeed", "fsdp")
COLUMNS = ("files", "converted", "crash", "recursion", "hang", "no compile", "unbound", "lost backward",
           "not idempotent")
# Names a rename may pick: the ones the conversion writes itself, and unicode ones.
NEW_NAMES = ("dist", "os", "DDP", "local_rank", "key", "value", "sampler", "world_size", "rank", "deepspeed",
             "model_engine", "result", "env_key", "torch", "módel", "данные", "模型", "λr", "DistributedSampler",
             "train_dataset", "ds_config", "config_file", "model_state", "message", "returned", "json", "contextlib")
ADDED_IMPORTS = ("import os", "import torch.distributed as dist", "import os as operating_system",
                 "from torch.nn.parallel import DistributedDataParallel as DDP", "import argparse",
                 "from torch.utils.data import DistributedSampler", "import torch", "import deepspeed")


# -- the fuzzed scripts ----------------------------------------------------------------------------
def seed_scripts() -> list[Path]:
    found = sorted(ROOT.glob("tests/cases/*/input.py"))
    return found + sorted(ROOT.glob("samples/*/train.py"))


Mutation = Callable[[ast.Module, random.Random], bool]


def statement_lists(tree: ast.AST) -> list[list[ast.stmt]]:
    """Every list of statements in the tree (bodies, else-blocks, handlers)."""
    found: list[list[ast.stmt]] = []
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                found.append(value)
    return found


def functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def main_guard(tree: ast.Module) -> ast.If | None:
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test):
            return stmt
    return None


def top_imports(tree: ast.Module) -> list[ast.stmt]:
    return [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom)) and
            not (isinstance(s, ast.ImportFrom) and s.module == "__future__")]


def parsed(code: str) -> list[ast.stmt]:
    return ast.parse(code).body


def move_import_late(tree: ast.Module, rng: random.Random) -> bool:
    imports = top_imports(tree)
    if not imports:
        return False
    chosen = rng.choice(imports)
    start = tree.body.index(chosen)
    tree.body.remove(chosen)
    tree.body.insert(rng.randint(start, len(tree.body)), chosen)
    return True


def move_import_above_main(tree: ast.Module, rng: random.Random) -> bool:
    imports, guard = top_imports(tree), main_guard(tree)
    if not imports:
        return False
    chosen = rng.choice(imports)
    tree.body.remove(chosen)
    tree.body.insert(tree.body.index(guard) if guard is not None else len(tree.body), chosen)
    return True


def import_into_function(tree: ast.Module, rng: random.Random) -> bool:
    """A copy of a module import (or one the conversion adds) somewhere in a function body."""
    bodies = [f.body for f in functions(tree)]
    if not bodies:
        return False
    imports = top_imports(tree)
    line = ast.unparse(rng.choice(imports)) if imports and rng.random() < 0.5 else rng.choice(ADDED_IMPORTS)
    body = rng.choice(bodies)
    body.insert(rng.randint(0, len(body)), parsed(line)[0])
    return True


def add_import_anywhere(tree: ast.Module, rng: random.Random) -> bool:
    body = rng.choice(statement_lists(tree))
    body.insert(rng.randint(0, len(body)), parsed(rng.choice(ADDED_IMPORTS))[0])
    return True


def import_into_block(tree: ast.Module, rng: random.Random) -> bool:
    """`import x` -> `try: import x` / `except ImportError: x = None`, or under `if True:`."""
    imports = [s for s in top_imports(tree) if isinstance(s, ast.Import)]
    if not imports:
        return False
    chosen = rng.choice(imports)
    name = chosen.names[0].asname or chosen.names[0].name.split(".")[0]
    text = ast.unparse(chosen)
    block = (f"try:\n    {text}\nexcept ImportError:\n    {name} = None" if rng.random() < 0.5 else f"if True:\n    {text}")
    tree.body[tree.body.index(chosen)] = parsed(block)[0]
    return True


def late_os(tree: ast.Module, rng: random.Random) -> bool:
    """`import os` and a use of it after module-level code."""
    position = rng.randint(len(tree.body) // 2, len(tree.body))
    tree.body[position:position] = parsed("import os\nprint(os.getcwd())")
    return True


def inline_main(tree: ast.Module, rng: random.Random) -> bool:
    """`def main(): body` + `if __name__ == "__main__": main()` -> the body at module level."""
    guard = main_guard(tree)
    defs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    if guard is None:
        return False
    for position, stmt in enumerate(guard.body):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in defs and not call.args:
            function = defs[call.func.id]
            if function.args.args or any(isinstance(n, ast.Return) for n in ast.walk(function)):
                return False
            guard.body[position : position + 1] = function.body
            if rng.random() < 0.5:  # training at module level, not under the guard
                tree.body[tree.body.index(guard) : tree.body.index(guard) + 1] = guard.body
            return True
    return False


def wrap_in_main(tree: ast.Module, rng: random.Random) -> bool:
    """Module-level work -> `def main():` and a `__main__` block that calls it."""
    if main_guard(tree) is not None:
        return False
    work = [s for s in tree.body[1:] if not isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
    if not work:
        return False
    tree.body = [s for s in tree.body if s not in work] + parsed("def main():\n    pass\n") + parsed(
        'if __name__ == "__main__":\n    main()')
    tree.body[-2].body = work  # type: ignore[attr-defined]
    return True


def duplicate_statement(tree: ast.Module, rng: random.Random) -> bool:
    body = rng.choice(statement_lists(tree))
    position = rng.randrange(len(body))
    body.insert(position + 1, copy.deepcopy(body[position]))
    return True


def delete_statement(tree: ast.Module, rng: random.Random) -> bool:
    body = rng.choice(statement_lists(tree))
    del body[rng.randrange(len(body))]
    if not body:
        body.append(ast.Pass())
    return True


def swap_statements(tree: ast.Module, rng: random.Random) -> bool:
    body = rng.choice(statement_lists(tree))
    if len(body) < 2:
        return False
    position = rng.randrange(len(body) - 1)
    body[position], body[position + 1] = body[position + 1], body[position]
    return True


def training_loops(tree: ast.Module) -> list[tuple[list[ast.stmt], ast.stmt]]:
    """(body, loop) for each `for`/`while` that calls `.backward(`."""
    found = []
    for body in statement_lists(tree):
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.While)) and ".backward(" in ast.unparse(stmt):
                found.append((body, stmt))
    return found


def wrap_loop(tree: ast.Module, rng: random.Random) -> bool:
    """The training loop -> `def run_loop(): <loop>` then `run_loop()`, maybe with `global`."""
    loops = training_loops(tree)
    if not loops:
        return False
    body, loop = rng.choice(loops)
    assigned = sorted({n.id for n in ast.walk(loop) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
    wrapper = parsed("def run_loop():\n    pass\n")[0]
    declared = parsed(f"global {', '.join(assigned)}") if assigned and rng.random() < 0.5 else []
    wrapper.body = [*declared, loop]  # type: ignore[attr-defined]
    position = body.index(loop)
    body[position : position + 1] = [wrapper, *parsed("run_loop()")]
    return True


def add_global(tree: ast.Module, rng: random.Random) -> bool:
    """`global x` at the top of a function that assigns x."""
    candidates = []
    for function in functions(tree):
        params = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
        stored = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        candidates += [(function, name) for name in sorted(stored - params)]
    if not candidates:
        return False
    function, name = rng.choice(candidates)
    function.body.insert(0, parsed(f"global {name}")[0])
    return True


def rename_variable(tree: ast.Module, rng: random.Random) -> bool:
    """Every use of one bound variable (not an imported name) renamed, often to a name the
    conversion writes itself (`dist`, `os`, `local_rank`) or to a unicode one."""
    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    stored = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} - imported)
    if not stored:
        return False
    old, new = rng.choice(stored), rng.choice(NEW_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == old:
            node.id = new
        elif isinstance(node, ast.arg) and node.arg == old:
            node.arg = new
        elif isinstance(node, ast.keyword) and node.arg == old:
            node.arg = new
    return True


def rename_function(tree: ast.Module, rng: random.Random) -> bool:
    """A function of the file (often `main`) renamed everywhere, to a plain or a unicode name."""
    names = sorted({f.name for f in functions(tree)})
    if not names:
        return False
    old = "main" if "main" in names and rng.random() < 0.5 else rng.choice(names)
    new = rng.choice(("run", "entry", "训练", "main_", "train", "dist"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == old:
            node.name = new
        elif isinstance(node, ast.Name) and node.id == old:
            node.id = new
    return True


def delete_after_use(tree: ast.Module, rng: random.Random) -> bool:
    """`del <name>` after the statement that last reads it in a block (`del model` after training)."""
    body, stmt = _any_statement(tree, rng)
    read = sorted({n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})
    if not read:
        return False
    body.insert(body.index(stmt) + 1, parsed(f"del {rng.choice(read)}")[0])
    return True


def nest_deeply(tree: ast.Module, rng: random.Random) -> bool:
    """A statement (the training loop, when there is one) under many nested `if`s / `with`s."""
    loops = training_loops(tree)
    body, stmt = rng.choice(loops) if loops and rng.random() < 0.7 else _any_statement(tree, rng)
    depth = rng.choice((2, 5, 15, 40, 90))
    wrapped: ast.stmt = stmt
    for level in range(depth):
        header = "with open(__file__):\n    pass" if level % 3 == 0 and level < 15 else "if True:\n    pass"
        outer = parsed(header)[0]
        outer.body = [wrapped]  # type: ignore[attr-defined]
        wrapped = outer
    body[body.index(stmt)] = wrapped
    return True


def _any_statement(tree: ast.Module, rng: random.Random) -> tuple[list[ast.stmt], ast.stmt]:
    body = rng.choice(statement_lists(tree))
    return body, rng.choice(body)


def star_import(tree: ast.Module, rng: random.Random) -> bool:
    position = rng.randint(0, len(tree.body))
    tree.body.insert(position, parsed(rng.choice(("from os.path import *", "from math import *")))[0])
    return True


MUTATIONS: tuple[Mutation, ...] = (
    move_import_late, move_import_above_main, import_into_function, add_import_anywhere, import_into_block,
    late_os, inline_main, wrap_in_main, duplicate_statement, delete_statement, swap_statements, wrap_loop,
    add_global, rename_variable, nest_deeply, star_import, rename_function, delete_after_use,
)


# -- text mutations: what `ast.unparse` never writes -------------------------------------------------
def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def join_lines(code: str, rng: random.Random) -> str:
    """Two neighbouring simple statements at one indent -> `a; b`."""
    lines = code.split("\n")
    pairs = [i for i in range(len(lines) - 1) if lines[i].strip() and _indent(lines[i]) == _indent(lines[i + 1])
             and not lines[i].rstrip().endswith((":", "\\", ",", "(", "[", "{")) and lines[i + 1].strip()
             and not lines[i + 1].lstrip().startswith(("elif", "else", "except", "finally", "@", "def ", "class ", "#"))]
    if not pairs:
        return code
    i = rng.choice(pairs)
    lines[i : i + 2] = [f"{lines[i]}; {lines[i + 1].strip()}"]
    return "\n".join(lines)


def one_line_suite(code: str, rng: random.Random) -> str:
    """`for x in y:` + one indented line -> `for x in y: stmt`."""
    lines = code.split("\n")
    candidates = [i for i in range(len(lines) - 2)
                  if lines[i].rstrip().endswith(":") and not lines[i].lstrip().startswith(("@", "#"))
                  and len(_indent(lines[i + 1])) > len(_indent(lines[i])) >= len(_indent(lines[i + 2]))]
    if not candidates:
        return code
    i = rng.choice(candidates)
    lines[i : i + 2] = [f"{lines[i].rstrip()} {lines[i + 1].strip()}"]
    return "\n".join(lines)


def comment_lines(code: str, rng: random.Random) -> str:
    lines = code.split("\n")
    for _ in range(rng.randint(1, 5)):
        i = rng.randrange(len(lines))
        lines.insert(i, f"{_indent(lines[i])}# note ünïcode {i}")
    return "\n".join(lines)


def tabs(code: str, rng: random.Random) -> str:
    return "\n".join(_indent(line).replace("    ", "\t") + line.lstrip() for line in code.split("\n"))


def crlf(code: str, rng: random.Random) -> str:
    return code.replace("\n", "\r\n")


TEXT_MUTATIONS: tuple[Callable[[str, random.Random], str], ...] = (join_lines, one_line_suite, comment_lines, tabs, crlf)


def mutant(source: str, rng: random.Random) -> tuple[str, str] | None:
    """(description, code) of one to four tree mutations of `source` (or none, keeping its own
    formatting), then maybe text mutations; None when the result is invalid."""
    done: list[str] = []
    code = source
    if rng.random() < 0.8:
        tree = ast.parse(source)
        done += [m.__name__ for m in rng.sample(MUTATIONS, rng.randint(1, 4)) if m(tree, rng)]
        try:
            code = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
        except (RecursionError, ValueError):
            return None
    for text_mutation in TEXT_MUTATIONS:
        if rng.random() < 0.12:
            changed = text_mutation(code, rng)
            if changed != code and _compiles(changed):
                code = changed
                done.append(text_mutation.__name__)
    if not done or not _compiles(code):
        return None
    return "+".join(done), code


def _compiles(code: str) -> bool:
    try:
        compile(code, "<fuzz>", "exec")
    except (SyntaxError, RecursionError, ValueError, MemoryError):
        return False
    return True


def fuzzed(count: int, seed: int) -> Iterator[tuple[str, str]]:
    """`count` mutants, round-robin over the seed scripts, the same ones for the same seed."""
    scripts = [(p.relative_to(ROOT), p.read_text()) for p in seed_scripts()]
    rng = random.Random(seed)
    made = attempts = 0
    while made < count and attempts < count * 5:
        path, source = scripts[attempts % len(scripts)]
        attempts += 1
        result = mutant(source, random.Random(rng.random()))
        if result is not None:
            made += 1
            yield f"{path}[{made}:{result[0]}]", result[1]


# -- site-packages ---------------------------------------------------------------------------------
def site_package_files(limit: int) -> list[Path]:
    """Up to `limit` .py files: first every one that calls `.backward(` (those reach the analysis and
    the rewrite), then the others taken in turn from each package so that no one package dominates."""
    site = next(Path(p) for p in sys.path if p.endswith("site-packages"))
    groups: dict[str, list[Path]] = defaultdict(list)
    training: list[Path] = []
    for path in sorted(site.rglob("*.py")):
        if ".backward(" in _read(path):
            training.append(path)
        else:
            groups[path.relative_to(site).parts[0]].append(path)
    for files in groups.values():
        random.Random(0).shuffle(files)
    chosen = training[:limit]
    while len(chosen) < limit and any(groups.values()):
        for name in sorted(groups):
            if groups[name] and len(chosen) < limit:
                chosen.append(groups[name].pop())
    return chosen


# -- checking one file -----------------------------------------------------------------------------
@dataclass
class Outcome:
    name: str
    target: str
    kinds: list[tuple[str, str]]  # (column, message)
    seconds: float


class Hang(Exception):
    pass


def _alarm(_signum, _frame):  # type: ignore[no-untyped-def]
    raise Hang()


def convert(code: str, target: str, name: str):  # type: ignore[no-untyped-def]
    """migrate_source, on a deep stack when the API offers one (migrate.api.run_deep)."""
    from migrate import api

    deep = getattr(api, "run_deep", None)
    if deep is not None:
        return deep(api.migrate_source, code, target, None, name)
    return api.migrate_source(code, target, None, name)


def check(job: tuple[str, str, str, float]) -> Outcome:
    name, code, target, timeout = job
    kinds: list[tuple[str, str]] = []
    start = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        kinds = _verdicts(name, code, target)
    except Hang:
        kinds = [("hang", f"over {timeout:.0f} s")]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return Outcome(name, target, kinds, time.perf_counter() - start)


def _verdicts(name: str, code: str, target: str) -> list[tuple[str, str]]:
    try:
        result = convert(code, target, name)
    except InputError:
        return []
    except RecursionError:
        return [("recursion", "RecursionError")]
    except Hang:
        raise
    except Exception as error:  # noqa: BLE001 - counting them is the point
        return [("crash", f"{type(error).__name__}: {error}"[:300])]
    kinds: list[tuple[str, str]] = []
    for item in result.findings:
        if item.code == "MIG901":
            kinds.append(("no compile" if "compile" in item.message else "unbound", item.message))
    if result.skipped or result.error or result.new == result.old:
        return kinds
    kinds.append(("converted", ""))
    try:
        compile(result.new, name, "exec")
    except SyntaxError as error:
        return [*kinds, ("no compile", f"{error.msg} (line {error.lineno})")]
    for unbound, line, _col in introduced_unbound_names(code, result.new)[:1]:
        kinds.append(("unbound", f"`{unbound}` read at line {line} before it is bound"))
    before, after = backward_calls(code), backward_calls(result.new)
    if before != after:
        kinds.append(("lost backward", f"{before} `.backward(` calls, {after} after the conversion"))
    try:
        again = convert(result.new, target, name)
    except Hang:
        raise
    except Exception as error:  # noqa: BLE001
        return [*kinds, ("not idempotent", f"second run: {type(error).__name__}: {error}"[:300])]
    if not again.skipped and again.new != result.new:
        kinds.append(("not idempotent", _first_difference(result.new, again.new)))
    return kinds


def backward_calls(code: str) -> int:
    """`x.backward(...)` calls: the conversion rewrites them one for one, never drops one."""
    return sum(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward"
               for node in ast.walk(ast.parse(code)))


def _first_difference(first: str, second: str) -> str:
    for number, (a, b) in enumerate(zip(first.splitlines(), second.splitlines()), 1):
        if a != b:
            return f"line {number}: {a.strip()[:60]!r} -> {b.strip()[:60]!r}"
    return "lines added or removed at the end"


# -- the report ------------------------------------------------------------------------------------
def run(jobs: list[tuple[str, str, str, float]], processes: int) -> list[Outcome]:
    if processes <= 1:
        return [check(job) for job in jobs]
    with multiprocessing.get_context("fork").Pool(processes, maxtasksperchild=200) as pool:
        return list(pool.imap(check, jobs, chunksize=4))


def report(title: str, outcomes: list[Outcome], examples: int) -> None:
    counts: dict[str, Counter[str]] = {target: Counter() for target in TARGETS}
    shown: dict[str, list[str]] = defaultdict(list)
    for outcome in outcomes:
        counts[outcome.target]["files"] += 1
        for column in {kind for kind, _ in outcome.kinds}:
            counts[outcome.target][column] += 1
        for kind, message in outcome.kinds:
            if kind != "converted" and len(shown[kind]) < examples:
                shown[kind].append(f"{outcome.target:9} {outcome.name}: {message}")
    print(f"\n{title}")
    print(f"{'target':10}" + "".join(f"{c:>15}" for c in COLUMNS))
    for target, counter in counts.items():
        print(f"{target:10}" + "".join(f"{counter[c]:>15}" for c in COLUMNS))
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:3]
    print("slowest: " + ", ".join(f"{o.name} {o.target} {o.seconds:.2f}s" for o in slowest))
    for kind in COLUMNS:
        for line in shown.get(kind, []):
            print(f"  [{kind}] {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="fuzzed scripts (0: none)")
    parser.add_argument("--limit", type=int, default=500, help="site-packages files (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a conversion counts as a hang")
    parser.add_argument("--examples", type=int, default=5, help="examples shown per column")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.count:
        scripts = list(fuzzed(args.count, args.seed))
        jobs = [(name, code, target, args.timeout) for name, code in scripts for target in TARGETS]
        report(f"fuzzed scripts (seed {args.seed}): {len(scripts)}", run(jobs, args.jobs), args.examples)
    if args.limit:
        files = site_package_files(args.limit)
        jobs = [(str(p), _read(p), target, args.timeout) for p in files for target in TARGETS]
        report(f"site-packages files: {len(files)}", run(jobs, args.jobs), args.examples)
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return ""


if __name__ == "__main__":
    sys.exit(main())
