"""The repeated blocks of a model: what FSDP2 shards one by one before the model itself.

A block is a class whose instances a model keeps in a list of layers: the items of an
`nn.ModuleList` / `nn.Sequential` built from one class (the script's own, or torch's) (`nn.ModuleList([Block(...) for _ in
range(n)])`, `nn.Sequential(*[Layer() for ...])`, a literal list of two or more of them, or
`self.layers.append(Block(...))` in a loop), and torch's own `nn.TransformerEncoder` /
`nn.TransformerDecoder` layers. The model's class is read where the script has it: in the
script, or in a module of the script's own folder that the script imports (followed through
that module's own imports, a few files deep). Classes are searched from the model's class down
through the classes it builds; a block's own insides are not searched (only the outermost
repeated blocks are sharded, which is what FSDP2's bottom-up order needs).
"""

from __future__ import annotations

import builtins
import os
from dataclasses import dataclass, field

import libcst as cst

from migrate.analysis.index import ScriptIndex, descendants, spell
from migrate.analysis.sites import ModelSite
from migrate.analysis.syntax import star_imports
from migrate.analysis.upstream import model_class_call
from migrate.project_files import ReadModule, read_from_disk, read_nothing

LIST_CONTAINERS = ("torch.nn.ModuleList", "torch.nn.Sequential")
TORCH_STACKS = {  # torch's own stacks of layers: the layer class each repeats
    "torch.nn.TransformerEncoder": ("TransformerEncoderLayer",),
    "torch.nn.TransformerDecoder": ("TransformerDecoderLayer",),
    "torch.nn.Transformer": ("TransformerEncoderLayer", "TransformerDecoderLayer"),
}
TORCH_LAYERS = frozenset({"TransformerEncoderLayer", "TransformerDecoderLayer"})  # --shard names torch knows
# torch's layers that hold weights worth a unit of their own (not activations, pooling, dropout, norms)
WEIGHTED_TORCH_LAYERS = ("Linear", "Conv", "LazyConv", "Embedding", "LSTM", "GRU", "RNN", "Bilinear",
                         "MultiheadAttention", "Transformer")
SEARCH_DEPTH = 4  # classes below the model's own that are searched for blocks
IMPORT_DEPTH = 3  # modules followed from the script to the one that defines a class


@dataclass(frozen=True)
class SourceFile:
    """A Python file read for its classes: the script, or a module of its folder."""

    module: str | None  # how the script imports it ("models", ".nets.gpt"); None: the script itself
    classes: dict[str, cst.ClassDef]
    imports: dict[str, str]  # local name -> qualified name
    path: str
    stars: tuple[str, ...] = ()  # the modules it star-imports (`from layers import *`, `from .functions import *`)

    def qualify(self, node: cst.BaseExpression) -> str | None:
        dotted = spell(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        qualified = self.imports.get(head)
        if qualified is None:
            return dotted
        return f"{qualified}.{rest}" if rest else qualified


@dataclass(frozen=True)
class BlockClass:
    """A class to shard one by one, and where the converted script finds it."""

    name: str
    module: str | None  # None: the script's own class; "torch.nn": torch's; else the module to import it from
    by_name: bool = False  # a --shard class this run cannot see: matched by its class name


@dataclass
class Blocks:
    """What the search found for one model."""

    classes: list[BlockClass] = field(default_factory=list)
    model_class: str | None = None  # the model's class as the script spells it
    unreadable: str | None = None  # why the model's class could not be read (then only the root is sharded)
    methods: frozenset[str] = frozenset()  # the methods the model's class (and its bases this run reads) defines
    parts: frozenset[str] = frozenset()  # its attributes built by a call (`self.encoder = Encoder()`): submodules
    torch_layer: bool = False  # the model is one of torch's own layers (`nn.Linear(...)`)
    unread: list[str] = field(default_factory=list)  # classes the model builds that this run could not read


def model_blocks(index: ScriptIndex, site: ModelSite, script_path: str, named: tuple[str, ...] = (),
                 read: ReadModule = read_nothing) -> Blocks:
    """The block classes of the model at `site`: the ones `named` (--shard), else those found (in
    the script, and in the modules of its folder that `read` returns)."""
    script = SourceFile(None, dict(index.classes), dict(index.imports), script_path, star_imports(index.module))
    folder = os.path.dirname(os.path.abspath(script_path))
    reader = _Reader(folder, read)
    built = model_class_call(index, site)
    found = Blocks()
    if built is None:
        found.unreadable = f"`{site.spelling}` is not built by a call this file shows"
        return _named(found, named, script, reader)
    qualified = index.qualify(built.func) or ""
    found.model_class = spell(built.func)
    if qualified in TORCH_STACKS:
        found.classes = [BlockClass(name, "torch.nn") for name in TORCH_STACKS[qualified]]
    elif qualified in LIST_CONTAINERS:
        found.classes = _list_items(built, script, reader)
    elif qualified.startswith("torch.nn."):
        found.torch_layer = True  # `nn.Linear(...)`: one layer, nothing finer to shard
    else:
        located = reader.locate(qualified, script)
        if located is None and found.model_class is None:  # `modeling.__dict__[name](...)`: looked up by a value
            found.unreadable = (f"it is built by `{cst.Module([]).code_for_node(built.func)}(...)`, a class looked up "
                                "while the script runs")
        elif located is None and found.model_class in index.functions:  # `cuda(Net(), use_cuda)`: a helper's result
            found.unreadable = (f"it is built by `{found.model_class}(...)`, a function (not a class) whose result "
                                "this conversion does not follow")
        elif located is None:
            found.unreadable = f"the class `{found.model_class}` is not defined in this file or in a module of its folder"
        else:
            cls, source = located
            found.classes = _search(cls, source, reader, set(), 0, found.unread)
            found.methods = _methods(cls, source, reader, 0)
            found.parts = _parts(cls)
    return _named(found, named, script, reader)


def _named(found: Blocks, named: tuple[str, ...], script: SourceFile, reader: _Reader) -> Blocks:
    """--shard CLASS,...: those classes instead of the ones found."""
    if not named:
        return found
    classes = []
    for name in named:
        if name in script.classes:
            classes.append(BlockClass(name, None))
        elif name in TORCH_LAYERS:
            classes.append(BlockClass(name, "torch.nn"))
        else:
            source = reader.defining(name)
            classes.append(BlockClass(name, source.module) if source is not None else BlockClass(name, None, by_name=True))
    found.classes = classes
    return found


def _search(cls: cst.ClassDef, source: SourceFile, reader: _Reader, seen: set[str], depth: int,
            unread: list[str]) -> list[BlockClass]:
    """The block classes under `cls`: items of its lists of layers, then (when it has none) the
    blocks of the classes of the script it builds."""
    if depth > SEARCH_DEPTH or f"{source.path}:{cls.name.value}" in seen:
        return []
    seen.add(f"{source.path}:{cls.name.value}")
    calls = [node for node in descendants(cls) if isinstance(node, cst.Call)]
    found: list[BlockClass] = []
    for call in calls:
        qualified = source.qualify(call.func) or ""
        if qualified in TORCH_STACKS:
            found += [BlockClass(name, "torch.nn") for name in TORCH_STACKS[qualified]]
        elif qualified in LIST_CONTAINERS:
            found += _list_items(call, source, reader)
        elif isinstance(call.func, cst.Attribute) and call.func.attr.value == "append" and call.args:
            found += _item_class(call.args[0].value, source, reader)  # `self.layers.append(Block(...))` in a loop
    if found:
        return _without_leaves_inside(_unique(found))
    for call in calls:  # no list here: the blocks may sit one class further down
        qualified = source.qualify(call.func) or ""
        located = reader.locate(qualified, source)
        if located is not None:
            found += _search(*located, reader, seen, depth + 1, unread)
        elif (_looks_like_a_class(qualified) and (spelled := spell(call.func)) and not spelled.startswith("self.")
              and spelled not in unread):  # `self.L2Norm(x)`: a call of a part, not a construction
            unread.append(spelled)
    return _unique(found)


def _looks_like_a_class(qualified: str) -> bool:
    """`L.Trunk`, `Encoder`: capitalised, and not torch's (whose classes hold no blocks of the script's)."""
    last = qualified.rsplit(".", 1)[-1]
    if "." not in qualified and hasattr(builtins, last):  # `ValueError(...)`
        return False
    return bool(last[:1].isupper()) and not qualified.startswith(("torch.", "typing.", "collections.", "dataclasses."))


def _methods(cls: cst.ClassDef, source: SourceFile, reader: _Reader, depth: int) -> frozenset[str]:
    """The names of the functions a class defines, with those of its bases this run can read."""
    own = {stmt.name.value for stmt in cls.body.body if isinstance(stmt, cst.FunctionDef)}
    for base in cls.bases:
        located = reader.locate(source.qualify(base.value) or "", source) if depth < SEARCH_DEPTH else None
        if located is not None:
            own |= _methods(*located, reader, depth + 1)
    return frozenset(own)


def _parts(cls: cst.ClassDef) -> frozenset[str]:
    """`encoder` for `self.encoder = nn.Sequential(...)` in any method of the class."""
    found: set[str] = set()
    for node in descendants(cls):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            for target in node.targets:
                dotted = spell(target.target) or ""
                if dotted.startswith("self.") and dotted.count(".") == 1:
                    found.add(dotted.removeprefix("self."))
    return frozenset(found)


def _list_items(call: cst.Call, source: SourceFile, reader: _Reader) -> list[BlockClass]:
    """The one class a ModuleList / Sequential repeats: `[Block() for _ in ...]`, `*[...]`, or a
    literal list (or the arguments) of two or more instances of one class."""
    values = [arg.value for arg in call.args]
    if len(values) == 1 and isinstance(values[0], (cst.ListComp, cst.GeneratorExp)):
        return _item_class(values[0].elt, source, reader)
    if len(values) == 1 and isinstance(values[0], cst.List):
        values = [element.value for element in values[0].elements]
    if any(isinstance(arg.value, (cst.ListComp, cst.GeneratorExp)) and arg.star for arg in call.args):
        comprehension = next(arg.value for arg in call.args if arg.star)
        assert isinstance(comprehension, (cst.ListComp, cst.GeneratorExp))
        return _item_class(comprehension.elt, source, reader)
    classes = [source.qualify(v.func) for v in values if isinstance(v, cst.Call)]
    if len(classes) >= 2 and len(set(classes)) == 1:
        return _item_class(values[0], source, reader)
    return []


def _item_class(value: cst.BaseExpression, source: SourceFile, reader: _Reader) -> list[BlockClass]:
    """The class of a list item when it is a model class the conversion can name."""
    if not isinstance(value, cst.Call):
        return []
    qualified = source.qualify(value.func) or ""
    name = qualified.rsplit(".", 1)[-1]
    if qualified.startswith("torch.nn.") and qualified.count(".") == 2 and name.startswith(WEIGHTED_TORCH_LAYERS):
        return [BlockClass(name, "torch.nn")]  # `[nn.Linear(w, w) for _ in range(n)]`
    if qualified.startswith("torch.nn."):
        return []  # `nn.Tanh()`, `nn.Dropout()`: nothing to shard
    located = reader.locate(qualified, source)
    if located is None:
        return []
    cls, where = located
    return [BlockClass(cls.name.value, where.module)]


def _without_leaves_inside(classes: list[BlockClass]) -> list[BlockClass]:
    """Torch's plain layers (`nn.Linear`) only when nothing bigger repeats: a block holds them,
    and FSDP2 must shard what a block holds before the block."""
    bigger = [c for c in classes if c.module != "torch.nn" or c.name in TORCH_LAYERS]
    return bigger or classes


def _unique(classes: list[BlockClass]) -> list[BlockClass]:
    seen: dict[tuple[str, str | None], BlockClass] = {}
    for each in classes:
        seen.setdefault((each.name, each.module), each)
    return list(seen.values())


class _Reader:
    """Reads the modules of the script's folder that a class is imported from (each file once)."""

    def __init__(self, folder: str, read: ReadModule = read_from_disk) -> None:
        self.folder = folder
        self.read = read
        self.files: dict[str, SourceFile | None] = {}

    def locate(self, qualified: str, source: SourceFile, depth: int = 0) -> tuple[cst.ClassDef, SourceFile] | None:
        """The class a qualified name in `source` means, when this file or its folder defines it."""
        if not qualified or depth > IMPORT_DEPTH:
            return None
        if qualified in source.classes:
            return source.classes[qualified], source
        module, _, name = qualified.rpartition(".")
        if not module:
            return self._through_stars(name, source, depth)
        target = self._file(self._absolute(module, source))
        if target is None:
            return None
        if name in target.classes:
            return target.classes[name], target
        if name in target.imports:  # re-exported: `from .gpt import GPT` in a package's __init__.py
            return self.locate(target.imports[name], target, depth + 1)
        return self._through_stars(name, target, depth)

    def _through_stars(self, name: str, source: SourceFile, depth: int) -> tuple[cst.ClassDef, SourceFile] | None:
        """`name` where `source` star-imports it (`from layers import *`, then `from .functions import *` there)."""
        for star in source.stars:
            found = self.locate(f"{star}.{name}" if not star.endswith(".") else f"{star}{name}", source, depth + 1)
            if found is not None:
                return found
        return None

    def defining(self, name: str) -> SourceFile | None:
        """A module already read that defines the class `name`."""
        return next((f for f in self.files.values() if f is not None and name in f.classes), None)

    def _absolute(self, module: str, source: SourceFile) -> str:
        """`module` as the script would import it (a relative import is taken from the importing file's package)."""
        if not module.startswith(".") or source.module is None:
            return module
        package = source.module.split(".") if source.module.lstrip(".") else []
        dots = len(module) - len(module.lstrip("."))
        is_package = os.path.basename(source.path) == "__init__.py"
        base = package if is_package else package[:-1]
        base = base[: len(base) - (dots - 1)] if dots > 1 else base
        rest = module.lstrip(".")
        return ".".join([*base, rest] if rest else base)

    def _file(self, module: str) -> SourceFile | None:
        if module in self.files:
            return self.files[module]
        relative = module.lstrip(".").replace(".", os.sep)
        parsed: SourceFile | None = None
        for candidate in (os.path.join(self.folder, relative + ".py"), os.path.join(self.folder, relative, "__init__.py")):
            text = self.read(candidate) if relative else None
            if text is not None:
                parsed = _parse(text, candidate, module)
                break
        self.files[module] = parsed
        return parsed


def _parse(text: str, path: str, module: str) -> SourceFile | None:
    try:
        tree = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    classes = {stmt.name.value: stmt for stmt in tree.body if isinstance(stmt, cst.ClassDef)}
    return SourceFile(module, classes, _imports(tree), path, star_imports(tree))



def _imports(tree: cst.Module) -> dict[str, str]:
    """Local name -> qualified name, for the module-level imports of a file."""
    found: dict[str, str] = {}
    for stmt in tree.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = spell(alias.name) or ""
                    local = spell(alias.asname.name) if alias.asname is not None else dotted.split(".")[0]
                    found[local or dotted] = dotted if alias.asname is not None else dotted.split(".")[0]
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                base = "." * len(small.relative) + (spell(small.module) or "" if small.module is not None else "")
                for alias in small.names:
                    name = spell(alias.name) or ""
                    local = spell(alias.asname.name) if alias.asname is not None else name
                    found[local or name] = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
    return found
