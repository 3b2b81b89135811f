"""The import graph of a script's own project (issue 27): which modules of the project a script
imports, transitively, and which names it takes from each; and the reverse, which entry points of a
folder import a given module.

The project root is the script's folder (sys.path[0] when it runs). An import is followed when it
resolves to a file under the root: `import engine`, `import pkg.models` (each package's
`__init__.py` on the way), `from pkg import mod` (a submodule) or `from pkg import name`, and
relative imports (`from .models import Net`, `from .. import utils`) that stay under the root.
Anything else (site-packages) is never read: only paths under the root are asked of the reader,
and none for a name of the standard library (`import os.path`, even with an `os/` in the folder).
Imports anywhere in a file count (inside functions, under `try:`).

Files are read only through the `ReadModule` handed in (migrate.project_files); this module opens
nothing and lists no folder (the caller names the candidates of `importing_entry_points`). Parsing is
`ast`'s; a module that cannot be read or parsed ends the walk there. The walk is limited in depth
(MAX_DEPTH imports from the script), in size (MAX_MODULES modules followed, MODULE_SIZE_LIMIT bytes
each; MAX_MODULES candidates looked at for importers) and in re-exports followed to where a name is
defined (REEXPORT_DEPTH). Each file is read, parsed and resolved once per question.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from migrate.project_files import MODULE_SIZE_LIMIT, ReadModule

MAX_DEPTH = 8  # imports followed from the script, one after another
MAX_MODULES = 200  # modules of the project followed for one graph; candidates looked at for importers
REEXPORT_DEPTH = 4  # `from .model import Net` in a package's __init__.py, followed this many times
STATEMENT_WIDTH = 80  # an import statement quoted in a message is cut to this many characters


@dataclass(frozen=True)
class Link:
    """`importer` imports the project module at `module` (`dotted` from the root) at `line`, with
    the statement as written (`text`) and the names it takes from it (none for `import engine`)."""

    importer: str
    module: str
    dotted: str
    names: tuple[str, ...]
    line: int
    text: str


@dataclass(frozen=True)
class Graph:
    """What a script imports of its own project: every link, in the order the walk found them, and
    the project modules found but not parsed (unreadable, too large, a syntax error)."""

    script: str
    root: str
    links: tuple[Link, ...]
    unparsed: tuple[str, ...] = ()

    def modules(self) -> list[str]:
        """The paths of the project modules the script imports, directly or not, each once; not the
        script itself, even when a module imports it back (its links still say so)."""
        return [path for path in dict.fromkeys(link.module for link in self.links) if path != self.script]

    def links_from(self, importer: str) -> list[Link]:
        """The links of one file of the graph."""
        return [link for link in self.links if link.importer == importer]

    def chain_to(self, module: str) -> list[Link]:
        """The first chain of links from the script to `module` ([] when it is not imported)."""
        reached: dict[str, Link] = {}
        for link in self.links:
            reached.setdefault(link.module, link)
        chain: list[Link] = []
        while module in reached and module != self.script and len(chain) <= MAX_DEPTH:
            chain.append(reached[module])
            module = reached[module].importer
        return list(reversed(chain)) if module == self.script else []


@dataclass(frozen=True)
class Importer:
    """An entry point of the folder that imports the module: the first chain of links to it (the
    first link is the entry point's own import statement)."""

    path: str
    chain: tuple[Link, ...]

    def describe(self, folder: str) -> str:
        """`train.py (line 3: `from engine import fit`)`, with the modules in between when the
        import is not direct (`, through trainer.py`); paths as seen from `folder`."""
        first = self.chain[0]
        through = [_relative(link.module, folder) for link in self.chain[:-1]]
        via = f", through {', '.join(through)}" if through else ""
        return f"{_relative(self.path, folder)} (line {first.line}: `{first.text}`{via})"


@dataclass(frozen=True)
class _Parsed:
    """One file of the project, parsed: its import statements, the names it defines, whether it
    runs when started (`is_entry_point`)."""

    imports: list[ast.Import | ast.ImportFrom]
    defines: frozenset[str]
    entry: bool
    text: str
    top_calls: frozenset[str]  # `engine` of a module-level `engine.fit(...)`, `main` of `main()`
    bound_at: dict[str, int]  # the names its import statements bind, each with the statement's line


@dataclass
class _Cache:
    """The files read for one question: each read once, parsed once when its imports are needed,
    and its links (for one root) worked out once."""

    read: ReadModule
    texts: dict[str, str | None] = field(default_factory=dict)
    files: dict[str, _Parsed | None] = field(default_factory=dict)
    links: dict[tuple[str, str], list[Link]] = field(default_factory=dict)

    def text(self, path: str, text: str | None = None) -> str | None:
        if path not in self.texts:
            self.texts[path] = self.read(path) if text is None else text
        return self.texts[path]

    def parsed(self, path: str, text: str | None = None) -> _Parsed | None:
        if path not in self.files:
            known = self.text(path, text)
            self.files[path] = None if known is None else _parse(known)
        return self.files[path]

    def exists(self, path: str) -> bool:
        return self.text(path) is not None

    def links_of(self, importer: str, root: str) -> list[Link]:
        if (importer, root) not in self.links:
            parsed = self.parsed(importer)
            self.links[importer, root] = [] if parsed is None else _links_of(importer, parsed, root, self)
        return self.links[importer, root]


def project_graph(script: str, read: ReadModule, text: str | None = None, depth: int = MAX_DEPTH) -> Graph:
    """The modules of the script's project that the script imports, transitively, up to `depth`
    imports away (`text`: the script's own text when the caller has it, else it is read). Breadth
    first, so each module's first link comes through the shortest chain."""
    return _walk(script, _Cache(read), text, min(depth, MAX_DEPTH))


def importing_entry_points(module: str, candidates: Iterable[str], read: ReadModule,
                           limit: int = MAX_MODULES) -> list[Importer]:
    """The entry points among `candidates` (paths, in the caller's order; at most `limit` looked
    at) that import the module at `module`, directly or not, through their own project (each
    candidate's folder). The module itself is never its own importer."""
    cache = _Cache(read)
    found: list[Importer] = []
    for path in list(candidates)[:limit]:
        if path == module:
            continue
        parsed = cache.parsed(path)
        if parsed is None or not (parsed.entry or set(parsed.top_calls) & set(parsed.bound_at)):
            continue  # runs nothing when started (the last test, below, needs its graph)
        graph = _walk(path, cache)
        same = [each for each in graph.modules() if os.path.normpath(each) == os.path.normpath(module)]
        chain = graph.chain_to(same[0]) if same else []
        if chain and (parsed.entry or _calls_the_project(parsed, graph.links_from(path))):
            found.append(Importer(path, tuple(chain)))
    return found


def is_entry_point(text: str) -> bool:
    """Whether a file runs when started: an `if __name__ == "__main__":` block, a loop at module
    level, or a module-level call of a function it defines itself (`main()`). (Among the candidates
    of `importing_entry_points`, a module-level call of a function of its project, such as
    `engine.fit(...)`, makes one too.)"""
    parsed = _parse(text)
    return parsed is not None and parsed.entry


def trailing_main_start(text: str) -> int | None:
    """Where a module's own demo starts: the offset of the first of the `if __name__ == "__main__":`
    blocks that end its top level, when nothing above them runs when started (a library that tests
    itself as a script); else None (no such block, or other code runs: an entry point)."""
    tree = _tree(text)
    if tree is None:
        return None
    start = len(tree.body)
    while start and _is_main_block(tree.body[start - 1]):
        start -= 1
    if start == len(tree.body) or not start or _runs(ast.Module(body=tree.body[:start], type_ignores=[]), top_level_names(tree)):
        return None
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
    return sum(len(line) for line in lines[:tree.body[start].lineno - 1])


def runs_when_started(text: str) -> bool:
    """An entry point (`is_entry_point`), or a file whose module-level code calls what it imports
    (`engine.fit(model, ...)`): it does something when started."""
    parsed = _parse(text)
    return parsed is not None and (parsed.entry or bool(set(parsed.top_calls) & set(parsed.bound_at)))


def defining_module(graph: Graph, importer: str, name: str, read: ReadModule) -> str | None:
    """The path of the project module that defines `name` as `importer` imports it (`from engine
    import fit`: engine.py, or the module a package's `__init__.py` re-exports it from), else None."""
    cache = _Cache(read)
    current = importer
    for _ in range(REEXPORT_DEPTH + 1):
        link = next((each for each in graph.links_from(current) if name in each.names), None)
        if link is None:
            return None
        parsed = cache.parsed(link.module)
        if parsed is not None and name in parsed.defines:
            return link.module
        current = link.module
    return None


def _calls_the_project(parsed: _Parsed, links: list[Link]) -> bool:
    """A module-level call of a name that one of the file's imports of its project binds."""
    lines = {link.line for link in links}
    return any(parsed.bound_at.get(name) in lines for name in parsed.top_calls)


def _walk(script: str, cache: _Cache, text: str | None = None, depth: int = MAX_DEPTH) -> Graph:
    root = os.path.dirname(script)
    links: list[Link] = []
    seen = {script}
    frontier = [script]
    cache.parsed(script, text)
    for _level in range(depth):
        following: list[str] = []
        for importer in frontier:
            for link in cache.links_of(importer, root):
                links.append(link)
                if link.module not in seen and len(seen) < MAX_MODULES:
                    seen.add(link.module)
                    following.append(link.module)
        frontier = following
    unparsed = tuple(path for path in dict.fromkeys(link.module for link in links)
                     if path in cache.files and cache.files[path] is None)
    return Graph(script, root, tuple(links), unparsed)


def _links_of(importer: str, parsed: _Parsed, root: str, cache: _Cache) -> list[Link]:
    """The project modules one file's import statements name, one link per module per statement."""
    links: list[Link] = []
    for node in parsed.imports:
        quoted = _quoted(parsed.text, node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                links += [Link(importer, path, dotted, (), node.lineno, quoted)
                          for dotted, path in _package_chain(root, alias.name.split("."), root, cache)]
        else:
            links += _from_links(importer, node, root, cache, quoted)
    return links


def _from_links(importer: str, node: ast.ImportFrom, root: str, cache: _Cache, quoted: str) -> list[Link]:
    """`from pkg.mod import a, sub`: the packages on the way, `pkg.mod` with the names taken from
    it, and `sub` when it is a submodule; nothing when `pkg.mod` is not under the root."""
    base = _base_folder(importer, root, node.level)
    if base is None:
        return []
    parts = node.module.split(".") if node.module else []
    chain = _package_chain(base, parts, root, cache) if parts else _own_package(base, root, cache)
    if parts and not chain:
        return []
    names: list[str] = []
    submodules: list[Link] = []
    for alias in node.names:
        sub = _module_file(base, parts + [alias.name], cache) if alias.name != "*" else None
        if sub is None:
            names.append(alias.name)
        else:
            dotted = _dotted(os.path.join(base, *parts, alias.name), root)
            submodules.append(Link(importer, sub, dotted, (), node.lineno, quoted))
    links = [Link(importer, path, dotted, (), node.lineno, quoted) for dotted, path in chain]
    if links and names:
        links[-1] = Link(importer, links[-1].module, links[-1].dotted, tuple(names), node.lineno, quoted)
    return links + submodules


def _package_chain(base: str, parts: list[str], root: str, cache: _Cache) -> list[tuple[str, str]]:
    """(dotted name, path) of each file `import a.b.c` runs under `base`: a/__init__.py and
    a/b/__init__.py where they are (a folder without one is a namespace package), then a/b/c.py
    or a/b/c/__init__.py. [] when the last is not there: not a module of the project. A module of
    the standard library (`os.path`) is never looked for under the root."""
    if not parts or (base == root and parts[0] in sys.stdlib_module_names):
        return []
    found: list[tuple[str, str]] = []
    for end in range(1, len(parts) + 1):
        path = _module_file(base, parts[:end], cache)
        if path is None and end == len(parts):
            return []
        if path is not None:
            found.append((_dotted(os.path.join(base, *parts[:end]), root), path))
    return found


def _own_package(base: str, root: str, cache: _Cache) -> list[tuple[str, str]]:
    """`from . import x`: the package's own `__init__.py`, when it has one."""
    path = os.path.join(base, "__init__.py")
    return [(_dotted(base, root), path)] if cache.exists(path) else []


def _module_file(base: str, parts: list[str], cache: _Cache) -> str | None:
    """The file of the module `parts` under `base`: `a/b.py`, else `a/b/__init__.py`, else None."""
    stem = os.path.join(base, *parts)
    for path in (stem + ".py", os.path.join(stem, "__init__.py")):
        if cache.exists(path):
            return path
    return None


def _base_folder(importer: str, root: str, level: int) -> str | None:
    """The folder an import statement's module is looked up in: the root for an absolute import,
    the importer's package (and its parents for `..`) for a relative one; None above the root."""
    if level == 0:
        return root
    inside = _parts(os.path.dirname(importer), root)
    if inside is None or level - 1 > len(inside):
        return None
    return os.path.join(root, *inside[:len(inside) - (level - 1)])


def _parts(folder: str, root: str) -> list[str] | None:
    """The folders from the root down to `folder`; None when `folder` is not under the root."""
    relative = os.path.normpath(os.path.relpath(folder or ".", root or "."))
    if relative == ".":
        return []
    parts = relative.split(os.sep)
    return None if parts[0] == ".." or os.path.isabs(relative) else parts


def _relative(path: str, folder: str) -> str:
    return os.path.relpath(path, folder) if folder else path


def _dotted(stem: str, root: str) -> str:
    """`pkg.models` for the folder or file stem `<root>/pkg/models`."""
    return ".".join(_parts(stem, root) or [])


def _tree(text: str) -> ast.Module | None:
    """The module's syntax tree; None when it is too large or does not parse."""
    if len(text) > MODULE_SIZE_LIMIT:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _parse(text: str) -> _Parsed | None:
    tree = _tree(text)
    if tree is None:
        return None
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    imports.sort(key=lambda node: (node.lineno, node.col_offset))
    defines = top_level_names(tree)
    return _Parsed(imports, frozenset(defines), _runs(tree, defines), text, _top_calls(tree), _bound_at(imports))


def _top_calls(tree: ast.Module) -> frozenset[str]:
    """The first name of each module-level call statement: `engine` of `engine.fit(...)`."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            while isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name):
                names.add(func.id)
    return frozenset(names)


def _bound_at(imports: list[ast.Import | ast.ImportFrom]) -> dict[str, int]:
    """The name each import binds (`import a.b` binds `a`; `as` names), with its statement's line."""
    bound: dict[str, int] = {}
    for node in imports:
        for alias in node.names:
            name = alias.asname or (alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name)
            bound.setdefault(name, node.lineno)
    return bound


def top_level_names(tree: ast.Module, every_target: bool = False) -> set[str]:
    """Names a module binds at its top level by a def, a class or an assignment (not by an import):
    an assignment's target when it is a name (`x = ...`, `x: int = ...`). With `every_target`, an
    augmented assignment's too, and every name inside a target (`a, b = ...`, and `x` of `x.y = ...`):
    all a module may clash on when joined with another (analysis.program)."""
    names: set[str] = set()
    assignments = (ast.Assign, ast.AnnAssign, ast.AugAssign) if every_target else (ast.Assign, ast.AnnAssign)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, assignments):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                inside = ast.walk(target) if every_target else [target]
                names.update(n.id for n in inside if isinstance(n, ast.Name))
    return names


def _runs(tree: ast.Module, defines: set[str]) -> bool:
    """An `if __name__ == "__main__":` block, a module-level loop, or a module-level call of a
    function of the file (`main()`)."""
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test):
            return True
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id in defines:
                return True
    return False


def _is_main_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and _is_main_test(node.test)


def _is_main_test(test: ast.expr) -> bool:
    if not isinstance(test, ast.Compare) or len(test.comparators) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    named = any(isinstance(side, ast.Name) and side.id == "__name__" for side in sides)
    return named and any(isinstance(side, ast.Constant) and side.value == "__main__" for side in sides)


def _quoted(text: str, node: ast.stmt) -> str:
    segment = " ".join((ast.get_source_segment(text, node) or "").split())
    return segment if len(segment) <= STATEMENT_WIDTH else segment[:STATEMENT_WIDTH - 3] + "..."
