"""The package's imports go one way down: no module imports one of a higher layer, and no import loop.

Read with `ast` only (the package is never imported): every `import`/`from ... import` in a module,
at module level, inside functions and under `if TYPE_CHECKING:` alike; `from pkg import name` counts
as importing `pkg.name` when that is a module, else `pkg`. Today's known violations are listed
below with why; the tests fail when a new one appears AND when a listed one is gone (so the lists
only shrink: delete the line once the code no longer needs it).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "migrate"

# The layers, lowest first. A module belongs to the longest entry that names it or a package above it;
# it may import modules of its own layer or of a lower one.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # the data everything shares: records, finding codes, how a runtime spells rank and setup
    ("data", ("migrate.records", "migrate.target_options", "migrate.findings", "migrate.runtime")),
    # reading, choosing and writing files, signals, templates, diffs, checked options
    ("basics", ("migrate.sources", "migrate.paths", "migrate.project_files", "migrate.project", "migrate.writing", "migrate.signals",
                "migrate.templating", "migrate.report", "migrate.options")),
    # what starts a converted script: each launcher's facts, the launch plan, its rendering and checks
    ("launching", ("migrate.launchers", "migrate.launch_plan", "migrate.launch", "migrate.kubernetes")),
    # read-only analysis of one script
    ("analysis", ("migrate.analysis",)),
    # the edit plan and what runs over its output
    ("rewriting", ("migrate.rewrite", "migrate.unused_imports", "migrate.unbound")),
    # the edits, handed the target's runtime and wrapper
    ("steps", ("migrate.steps",)),
    # the registry: per target its steps, options, codes and artifacts
    ("targets", ("migrate.targets",)),
    # conversion of a source, a file, a folder; the package's public face
    ("api", ("migrate.api", "migrate")),
    # tools built over conversion: launch, verify, check, review, advise, doctor
    ("tools", ("migrate.verify", "migrate.check", "migrate.review",
               "migrate.advise", "migrate.param_count", "migrate.doctor", "migrate.doctor_probe")),
    # the command line: parsing and formatting only
    ("commands", ("migrate.cli", "migrate.__main__", "migrate.advise_command", "migrate.check_command",
                  "migrate.doctor_command", "migrate.launch_command")),
]

# module -> module imports from a lower layer to a higher one that today's code still has, and why.
UPWARD: dict[tuple[str, str], str] = {
}

# Imports within one layer that close a loop, kept on purpose for now (none today: add one only
# with why, and the test fails once it no longer closes a loop).
LOOP_EDGES: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(path): path for path in ROOT.rglob("*.py")}


def _known(name: str) -> str | None:
    """The module of ours `name` imports: itself, else the nearest package above it; None if not ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _from_base(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[:len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def _imported(module: str, path: Path) -> dict[str, int]:
    """Every module of ours that `module` imports, with the line of its first import."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(module, path, node)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        for name in names:
            target = _known(name)
            if target is not None and target != module:
                found.setdefault(target, node.lineno)
    return found


GRAPH: dict[str, dict[str, int]] = {module: _imported(module, path) for module, path in MODULES.items()}


def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the entry, layer)
    for rank, (_name, entries) in enumerate(LAYERS):
        for entry in entries:
            if (module == entry or module.startswith(entry + ".")) and (best is None or len(entry) > best[0]):
                best = (len(entry), rank)
    return None if best is None else best[1]


def _where(module: str, target: str) -> str:
    return f"{MODULES[module].relative_to(ROOT.parent)}:{GRAPH[module][target]}: {module} imports {target}"


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_every_module_has_a_layer() -> None:
    assert [module for module in sorted(MODULES) if _layer(module) is None] == []


def test_no_module_imports_a_higher_layer() -> None:
    upward = {(module, target) for module, targets in GRAPH.items() for target in targets
              if (_layer(target) or 0) > (_layer(module) or 0)}
    new = sorted(_where(module, target) for module, target in upward - UPWARD.keys())
    assert new == [], "imports from a lower layer to a higher one:\n" + "\n".join(new)
    gone = sorted(f"{module} -> {target}" for module, target in UPWARD.keys() - upward)
    assert gone == [], "no longer imported upward: delete from UPWARD:\n" + "\n".join(gone)


def test_no_import_loop() -> None:
    allowed = UPWARD.keys() | LOOP_EDGES.keys()
    cut = {module: {t for t in targets if (module, t) not in allowed} for module, targets in GRAPH.items()}
    loops = _loops(cut)
    assert loops == [], "import loops:\n" + "\n".join(
        " <-> ".join(group) + "\n  " + "\n  ".join(_where(m, t) for m in group for t in GRAPH[m] if t in group)
        for group in loops)
    in_loops = {(m, t) for group in _loops({m: set(ts) for m, ts in GRAPH.items()}) for m in group
                for t in GRAPH[m] if t in group}
    gone = sorted(f"{m} -> {t}" for m, t in LOOP_EDGES.keys() - in_loops)
    assert gone == [], "no longer part of a loop: delete from LOOP_EDGES:\n" + "\n".join(gone)


def test_the_loop_finder_finds_a_loop() -> None:
    """The checks above are only as good as the loop finder: it must see a loop of three and nothing else."""
    assert _loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _loops({"a": {"b"}, "b": set()}) == []
