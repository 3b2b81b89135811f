"""What a project module's own demo runs of what a conversion edits (issue 27).

A library module may end with `if __name__ == "__main__":` blocks of its own (a demo or a self-test,
run as `python module.py`, one process, no launcher). The program holds the module without them
(analysis.program: the part's `tail`); when the conversion edits the module, those blocks must not
run any of what it edited, directly or through another function or class of the module: an edited
loader (a DistributedSampler), a `dist.barrier()` or a `.module` read would need the launcher's
process group there too. A rank-0 guard on the launcher's RANK, true in one process, needs nothing.

What only the demo runs is not edited at all (`demo_only_definitions`: the functions and classes
the demo reaches and the program never names), so that its functions stay as they are.

`edited_names_the_demo_runs(old, new, demo)` answers with the names, in the module's order. A
top-level statement other than an import, a def or a class that the rewrite made need the launcher
runs for the demo too (the module runs it on import); it is named `module-level code`. Read-only; parses with `ast`.
"""

from __future__ import annotations

import ast

MODULE_LEVEL = "module-level code"
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# what only a rank started by the launcher has (a rewrite that adds one of these needs it)
LAUNCHED_ONLY = ("dist.", "torch.distributed", "DistributedSampler", "hvd.", "deepspeed.", ".module", "device_mesh",
                 "fully_shard", "model_engine")


def edited_names_the_demo_runs(old: str, new: str, demo: str) -> list[str]:
    """The module's top-level functions and classes that the rewrite from `old` to `new` made need
    the launcher (`_needs_the_launcher`) and that `demo` (its own `__main__` blocks) reaches, by name, directly or through another
    top-level function or class of the module; `MODULE_LEVEL` first when module-level code changed.
    Empty when nothing it runs changed, or when a text does not parse (then nothing can be said:
    the caller's compile check speaks)."""
    try:
        before, after, ran = ast.parse(old), ast.parse(new), ast.parse(demo)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    old_defs, new_defs = _definitions(before), _definitions(after)
    changed = [name for name, text in old_defs.items() if _needs_the_launcher(text, new_defs.get(name, ""))]
    reached = _reached(_names_read(ran), before)
    found = [name for name in changed if name in reached]
    module_level = _needs_the_launcher("\n".join(_other_code(before)), "\n".join(_other_code(after)))
    return ([MODULE_LEVEL] if module_level else []) + found


def _needs_the_launcher(old: str, new: str) -> bool:
    """Whether the rewrite made a definition need what only a launched rank has: a call into the
    process group or a framework (`dist.`, `hvd.`, `deepspeed.`), a DistributedSampler, or the
    wrapper's `.module` read from a plain model. A rank-0 guard on the launcher's RANK
    (`os.environ.get("RANK", "0") == "0"`) is true in one process and needs nothing."""
    return any(new.count(word) > old.count(word) for word in LAUNCHED_ONLY)


def _definitions(tree: ast.Module) -> dict[str, str]:
    """Each top-level def and class, by name, as `ast.unparse` writes it."""
    return {node.name: ast.unparse(node) for node in tree.body if isinstance(node, DEFINITIONS)}


def _other_code(tree: ast.Module) -> list[str]:
    """The module's top-level statements other than imports, defs and classes, as written by `ast.unparse`."""
    skipped = (ast.Import, ast.ImportFrom, *DEFINITIONS)
    return [ast.unparse(node) for node in tree.body if not isinstance(node, skipped)]


def _names_read(node: ast.AST) -> set[str]:
    return {each.id for each in ast.walk(node) if isinstance(each, ast.Name)}


def _reached(start: set[str], tree: ast.Module) -> set[str]:
    """`start` and every top-level def or class of the module that one of them names, transitively."""
    bodies = {node.name: node for node in tree.body if isinstance(node, DEFINITIONS)}
    reached: set[str] = set()
    waiting = [name for name in start if name in bodies]
    while waiting:
        name = waiting.pop()
        if name in reached:
            continue
        reached.add(name)
        waiting += [each for each in _names_read(bodies[name]) if each in bodies and each not in reached]
    return reached


def demo_only_definitions(text: str, demo: str, others: list[str]) -> set[str]:
    """The top-level functions and classes of a module (`text`, without its demo) that its own demo
    reaches and the program does not: `others` (the program's other files) never name them, as a
    name or an attribute (`utils.say`), and neither does the module's own code that runs on import,
    directly or through another of its definitions. Empty when a text does not parse."""
    try:
        tree, ran = ast.parse(text), ast.parse(demo)
        named = set().union(*(_names_and_attributes(ast.parse(other)) for other in others))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    on_import = ast.Module(body=[node for node in tree.body if not isinstance(node, DEFINITIONS)], type_ignores=[])
    used = _reached(named | _names_read(on_import), tree)
    return _reached(_names_read(ran), tree) - used


def _names_and_attributes(tree: ast.AST) -> set[str]:
    return {node.id if isinstance(node, ast.Name) else node.attr for node in ast.walk(tree)
            if isinstance(node, (ast.Name, ast.Attribute))}
