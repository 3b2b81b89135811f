"""A script and the modules of its own project read as one program (issue 27): the parts, parsed
together so that the analysis finds the training step, the loaders and the writes wherever they
are, and split again so that each file gets its own edits.

The text of the program is the script's text, then each module's, each followed by a `pass` line
of its own (the sentinel that keeps a file's trailing comments with that file; a module's leading
comments get one too, so they stay its header). Parsed once, the
statements of each part are the very nodes of that part's own module (`Part.module`), so the edits
the steps key by node apply to the file that holds the node; a part's text is the program's text
from its first line, so a position in the program is a position in one file (`Program.place`).

A module joins the program only when it is a library (no top-level code that runs:
project.is_entry_point; its own demo, `if __name__ == "__main__":` blocks that end the file, is held
out of the program as the part's `tail` and written back after it unchanged) whose top-level names do not collide with the script's or another
part's, and whose text parses back to itself; anything else is left out (the conversion then sees
it as today: through the reader, for MIG002's words). The names the parts import from each other
(`from engine import train_one_epoch`, `import engine`) are resolved by the index as functions and
classes of the program (`build_index(..., local_modules=...)`).

Read-only; reads no file itself (the caller's `ReadModule`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property

import libcst as cst

from migrate.project import Graph, is_entry_point, project_graph, runs_when_started, top_level_names, trailing_main_start
from migrate.project_files import ReadModule

SENTINEL = "pass\n"
MAX_PARTS = 12  # modules joined to one script at most
JOIN_DEPTH = 2  # imports followed from the script
# what a module must mention to be joined to a script that trains by itself: a write, a save, a download, a TensorBoard or visdom writer
WRITE_WORDS = ("backward", ".save(", "open(", "urlretrieve", "download", "makedirs", "mkdir", ".savefig(", "print(", "SummaryWriter(", "Visdom(")
JOIN_WORDS = (*WRITE_WORDS, "DataLoader(")  # or a loader to shard where it is built


@dataclass(frozen=True, eq=False)
class Part:
    """One file of the program: its path, its dotted name from the project root (`engine`; the
    script's is its stem), its own module (whose statements are nodes of the program), its text,
    and the program line its text starts at."""

    path: str
    dotted: str
    module: cst.Module
    text: str  # as parsed: the file's text, ending with a newline
    first_line: int
    original: str  # the file's text as read (it may not end with a newline)
    header_lines: int = 0  # its leading comment lines, which a sentinel line follows in the program
    shift: int = 0  # 1 for a module: the program holds one line (that sentinel) the file does not
    imported_at: int = 1  # the script's line that imports it, directly or through another module
    tail: str = ""  # the module's own trailing `if __name__ == "__main__":` blocks, held out of the program

    def as_written(self, new: str) -> str:
        """The file's new text, without the newline parsing added at its end; a module's own
        `__main__` blocks follow it unchanged."""
        if self.tail:
            return new + self.tail
        return new[:-1] if self.original != self.text and new.endswith("\n") else new

    @property
    def tail_line(self) -> int:
        """The file's line of the first of its own `__main__` blocks (0: none)."""
        return self.text.count("\n") + 1 if self.tail else 0

    @property
    def last_line(self) -> int:
        return self.first_line + self.text.count("\n") - 1 + self.shift

    def file_line(self, line: int) -> int:
        """A program line of this part as the line of its file."""
        offset = 0 if line < self.first_line + self.header_lines else self.shift
        return line - self.first_line + 1 - offset


@dataclass(frozen=True)
class LeftOut:
    """A library module of the project that the script imports but the program could not hold: it
    binds a top-level name the script or a module joined before it binds too (`Generator` in two
    model files). What runs there is not converted."""

    path: str
    names: tuple[str, ...]
    line: int  # the script's line that imports it (directly or through a module)


@dataclass(frozen=True, eq=False)
class Program:
    """The script (parts[0]) and the library modules joined to it."""

    module: cst.Module
    code: str
    parts: tuple[Part, ...]
    left_out: tuple[LeftOut, ...] = ()

    @property
    def script(self) -> Part:
        return self.parts[0]

    @property
    def modules(self) -> tuple[Part, ...]:
        return self.parts[1:]

    def local_modules(self) -> frozenset[str]:
        """The dotted names of the joined modules (`engine`, `pkg.utils`)."""
        return frozenset(part.dotted for part in self.modules)

    def place(self, line: int) -> tuple[Part, int]:
        """The part a program line belongs to, and the line within that file."""
        for part in self.parts:
            if part.first_line <= line <= part.last_line:
                return part, part.file_line(line)
        return self.script, line

    def part_of(self, stmt: cst.CSTNode) -> Part:
        """The part whose top-level statement `stmt` is (the script for any other node)."""
        return self._owners.get(id(stmt), self.script)

    @cached_property
    def _owners(self) -> dict[int, Part]:
        return {id(stmt): part for part in self.modules for stmt in part.module.body}


def project_walk(script_path: str, script_text: str, read: ReadModule) -> Callable[[], Graph]:
    """The script's project graph as `join` reads it (migrate.project, JOIN_DEPTH imports deep): walked
    on the first call, the same graph after, for whatever else asks about the same conversion (MIG002)."""
    return cache(lambda: project_graph(script_path, read, script_text, depth=JOIN_DEPTH))


def join(script_path: str, script_text: str, read: ReadModule, step_elsewhere: bool = True,
         walk: Callable[[], Graph] | None = None, demos: bool = True) -> Program | None:
    """The program of the script and the library modules of its project it imports (at most
    JOIN_DEPTH imports away), or None when no module can join. `step_elsewhere`: only when one of
    them runs a backward (the script has none); else when one of them writes, saves or downloads.
    `walk`: the caller's project_walk of the script, when it shares the graph. `demos`: whether a
    module that ends with its own `__main__` demo may join (held out of the program as its tail)."""
    if not runs_when_started(script_text):
        return None  # a library module alone: its conversion is refused (MIG119), never joined
    graph = (walk or project_walk(script_path, script_text, read))()
    dotted = {link.module: link.dotted for link in graph.links}
    candidates: list[tuple[str, str, str]] = []
    tails: dict[str, str] = {}
    for path in graph.modules()[:MAX_PARTS]:
        text = read(path)
        if text is None or not text.strip() or os.path.basename(path) == "__init__.py":
            continue
        if is_entry_point(text):
            start = trailing_main_start(text) if demos else None
            if start is None:
                continue  # it runs when started: another entry point, never joined
            text, tails[path] = text[:start], text[start:]
        candidates.append((path, dotted[path], text))
    words = ("backward",) if step_elsewhere else JOIN_WORDS
    if not any(word in text for _path, _name, text in candidates for word in words):
        return None  # nothing there this conversion would find
    taken = _top_names(script_text)
    if taken is None:
        return None
    joined: list[tuple[str, str, str]] = []
    left_out: list[LeftOut] = []
    for path, name, text in candidates:
        names = _top_names(text)
        if names is None:
            continue
        if names & taken:
            if path in tails or not any(word in text for word in WRITE_WORDS):
                continue  # a module with a demo of its own, or nothing there a conversion would change: no word about it
            chain = graph.chain_to(path)
            left_out.append(LeftOut(path, tuple(sorted(names & taken)), chain[0].line if chain else 1))
            continue
        taken |= names
        joined.append((path, name, text))
    program = _program(script_path, script_text, joined) if joined else None
    if program is None:
        return None
    chains = {path: graph.chain_to(path) for path, _name, _text in joined}
    parts = (program.script, *(dataclasses.replace(part, imported_at=chains[part.path][0].line if chains.get(part.path) else 1,
                                                   tail=tails.get(part.path, ""), original=part.original + tails.get(part.path, ""))
                               for part in program.modules))
    return dataclasses.replace(program, parts=parts, left_out=tuple(left_out))


def _program(script_path: str, script_text: str, modules: list[tuple[str, str, str]]) -> Program | None:
    """Parse the parts as one text and split the statements back into modules of their own. A
    module's header (its leading comments: a coding cookie, a licence) is followed by a sentinel of
    its own, so that the comments stay the module's header and new imports go below them."""
    stem = os.path.splitext(os.path.basename(script_path))[0]
    originals = [(script_path, stem, script_text), *modules]
    texts = [(path, name, text if text.endswith("\n") else text + "\n") for path, name, text in originals]
    try:
        own = [cst.parse_module(text) for _path, _name, text in texts]
    except (cst.ParserSyntaxError, RecursionError):
        return None
    chunks: list[str] = []
    for number, ((_path, _name, text), alone) in enumerate(zip(texts, own)):
        header = "".join(text.splitlines(keepends=True)[:len(alone.header)]) if number else ""
        chunks.append(header + SENTINEL + text[len(header):] if number else text)
        chunks.append(SENTINEL)
    code = "".join(chunks)
    try:
        merged = cst.parse_module(code)
    except (cst.ParserSyntaxError, RecursionError):
        return None
    parts: list[Part] = []
    position, line = 0, 1
    for number, ((path, name, text), (_path, _name, original), alone) in enumerate(zip(texts, originals, own)):
        shift = 1 if number else 0  # a module's header sentinel
        if shift and not _is_sentinel(merged.body[position] if position < len(merged.body) else None):
            return None
        position += shift
        count = len(alone.body)
        body = merged.body[position:position + count]
        sentinel = merged.body[position + count] if position + count < len(merged.body) else None
        if not _is_sentinel(sentinel):
            return None
        assert isinstance(sentinel, cst.SimpleStatementLine)
        module = alone.with_changes(body=body, footer=sentinel.leading_lines,
                                    header=alone.header if number else merged.header)
        if module.code != text:
            return None
        header_lines = len(alone.header) if number else 0
        parts.append(Part(path, name, module, text, line, original, header_lines, shift))
        position += count + 1
        line += text.count("\n") + shift + 1
    return Program(merged, code, tuple(parts))


def _is_sentinel(stmt: cst.BaseStatement | None) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Pass)


def _top_names(text: str) -> set[str] | None:
    """The names a file binds at its top level other than by an import, every one it may clash on
    (project.top_level_names); None when it cannot be parsed."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return top_level_names(tree, every_target=True)
