"""Output happens once: prints (and `sys.stdout.write`), `logging` records below ERROR, tensorboard
and wandb writes, checkpoints (`torch.save`, `np.save`), figures and images (`savefig`, a PIL
image's or a matplotlib animation's `.save(path)`, the image bound to a name or saved where it is
made: `Image.fromarray(a).save(p)`, `Image.open(p).convert("L").save(q)`), `Path.write_text`/`write_bytes` and files
opened for writing (the whole `with`, by `open` or any opener given a mode that writes: `bz2.open(p, "wb")`,
`gzip.open`, `lzma.open`), and a table's writes (`df.to_csv(path)`, `to_parquet`, `to_pickle`) run on rank 0 only; after teardown (once `main()` has returned) the writes ask
the launcher's RANK; tqdm bars are disabled on the other ranks. Errors are still logged by every rank, and
so is a message about one sample (a print in a Dataset's `__getitem__`): each rank reads its own samples.

A writer (`self.writer = SummaryWriter()`) is made on rank 0 only, `... if rank 0 else None`, where
every statement that reads it (`os.path.join(self.writer.log_dir, name)`, `save_config(self.writer.log_dir)`),
or reads a name bound from it, can run on rank 0 too: those are guarded as well. Where one cannot
(it returns, or may need every rank), the writer is made on every rank and MIG120 names that read.
A writer a function of the program makes and returns (`def create_summary(self): writer =
SummaryWriter(...); return writer`) is a writer where it is called (`self.writer =
self.summary.create_summary()`), and its own `SummaryWriter(...)` is left as it is; reads of
`self.writer` through an instance of the class (`trainer.writer.close()`) count as reads.

A statement that could run a collective is never put under the guard, or ranks would wait on each
other forever: a print of such a value computes it on every rank and prints it on rank 0. For
torch.distributed's wrappers that is a forward of the wrapped model (DDP may broadcast buffers,
FSDP and ZeRO-3 gather weights) or a call into the script's own functions that mention a model;
Horovod's forward runs no collective (its all-reduces run in backward and the optimizer's step),
so there only a backward, a step, a broadcast the conversion places or an `hvd.`/`dist.` call,
directly or through the script's own functions, keeps a statement off the guard. A method of an
attribute that runs no forward (`self.net.state_dict()`, `self.scheduler.get_last_lr()`) or any call
of a writer (`self.writer.add_scalar(...)`) is none of these: a save helper method of the class that
trains (`def save(self, path): torch.save(self.net.state_dict(), path)`) writes on rank 0 alone.
A writer's call whose value may need every rank computes it on every rank first, as a print does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from migrate.analysis.entry import runs_in_process_group
from migrate.analysis.index import CallSite, Scope, ScriptIndex, child_nodes, descendants, spell
from migrate.analysis.models import aliases, foreign_callees, foreign_function, foreign_method
from migrate.analysis.state_dicts import moved_names
from migrate.analysis.syntax import calls_in
from migrate.analysis.trained import caller_teardown
from migrate.analysis.training import BUILTIN_NAMES, class_of_binding
from migrate.steps.base import Context, expression, statement, with_keyword
from migrate.steps.download_units import opener_mode, writes_in_mode
from migrate.target_options import zero_stage

# a logger's (or a writer's) methods that write a message: `logger.info(...)` prints on every rank
# (_sink_kind), and handed a model they only read it (_only_reads)
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "log", "write", "add_text"})
WANDB_CALLS = frozenset({"init", "log", "finish", "watch", "save", "log_artifact", "define_metric", "alert"})
WRITERS = ("torch.utils.tensorboard.SummaryWriter", "tensorboardX.SummaryWriter", "visdom.Visdom")
WRITER_CLASSES = frozenset(writer.rsplit(".", 1)[-1] for writer in WRITERS)  # as a module not read with the script spells them
SAVES = ("torch.save", "numpy.save", "numpy.savez", "json.dump", "pickle.dump", "yaml.dump",
         "plotly.offline.plot", "plotly.io.write_html", "plotly.io.write_image")  # plotly's plot() writes an HTML file
# what `x = ...` (or a call chained on it) makes that `x.save(path)` writes to a file
IMAGE_MAKERS = ("PIL.", "matplotlib.animation.", "torchvision.transforms.functional.to_pil_image",
                "torchvision.transforms.ToPILImage", "torchvision.transforms.transforms.ToPILImage")
PATH_WRITES = frozenset({"write_text", "write_bytes"})
# methods that read one sample (a Dataset's): each rank reads its own samples, so what they print is said once
PER_SAMPLE = (".__getitem__", ".__iter__")
# a table's methods that write it to the file they are given (pandas: `df.to_csv(path)`)
TABLE_WRITES = frozenset({"to_csv", "to_parquet", "to_pickle", "to_excel", "to_feather", "to_hdf"})
RANK_WORDS = ("rank", "is_main", "main_process", "master")


def rank_zero(ctx: Context) -> None:
    index = ctx.index
    loggers = _bound_names(index, lambda q: q.endswith("getLogger"))
    factories = writer_factories(index, ctx.sites.training_scopes) | _foreign_writer_classes(ctx)
    writers = _bound_names(index, lambda q: q in WRITERS) | _made_by(index, factories)
    runs = _bound_names(index, lambda q: q == "wandb.init")
    images = {b.target for b in index.bindings if isinstance(b.value, cst.Call) and _makes_image(index, b.value)}
    for call in index.calls:
        if call.place.scope.class_name in factories:
            continue  # a method of a writer class (`Visualizer.scalar`): only rank 0 makes one, so only rank 0 runs it
        kind = _sink_kind(index, call, loggers, writers, runs)
        if kind == "create" and call.place.scope.name in factories:
            continue  # `writer = SummaryWriter(...)` ... `return writer`: made where the factory is called
        if kind is None and _factory_called(index, call.node, factories):
            kind = "create"
        if kind is None and _saves_image(index, call, images):
            kind = "write"
        if kind is None and foreign_file_write(ctx, call) is not None:
            kind = "foreign"
        if kind == "print" and call.place.scope.name.endswith(PER_SAMPLE):
            continue  # a message about one sample: the rank that reads that sample says it, once
        if kind == "progress":
            _disable_progress_bar(ctx, call)
        elif kind == "create":
            _create_on_rank_zero(ctx, call)
        elif kind is not None:
            _guard_statement(ctx, call, kind)
    for stmt in index.block_of:
        if isinstance(stmt, cst.With) and _opens_for_writing(index, stmt) and may_guard(ctx, stmt):
            collective = collective_call(ctx, stmt.body)
            if collective is not None:
                ctx.report("MIG120", f"`{ctx.code(stmt).strip().splitlines()[0]}` writes a file, but its body calls "
                           f"`{ctx.code(collective.func)}(...)`, which {_joins(ctx)} that every rank must join: left "
                           "on every rank, so every rank writes the file; compute the values on every rank first, then "
                           f"write them under `if {ctx.distributed.said(ctx.distributed.rank)} == 0:`", stmt)
                continue
            ctx.plan.guard(stmt, ctx.rank_zero_test())
    _settle_handles(ctx)


def table_file(call: cst.Call) -> cst.Arg | None:
    """The file `df.to_csv(path)` writes (its first argument, or `path_or_buf=`/`path=`); None: it returns the text."""
    return next((a for a in call.args if a.keyword is None or a.keyword.value in ("path_or_buf", "path", "excel_writer")), None) \
        if call.args and (call.args[0].keyword is None or call.args[0].keyword.value in ("path_or_buf", "path", "excel_writer")) else None


def writer_factories(index: ScriptIndex, training: set[str]) -> set[str]:
    """The functions of this program that make a writer and return it (`def create_summary(self):
    writer = SummaryWriter(...); return writer`), and the classes that wrap one, whose `__init__`
    makes it and none of whose methods trains (`class Visualizer: def __init__(self): self.vis =
    Visdom(...)`, with that `__init__`; not a Trainer holding its writer): their callers hold a writer."""
    def find() -> set[str]:
        found: set[str] = set()
        trainers = {name.rsplit(".", 1)[0] for name in training if "." in name}
        for name, scope in index.functions.items():
            if scope.class_name and scope.class_name not in trainers and name == f"{scope.class_name}.__init__" and any(
                    b.place.scope is scope and b.target.startswith("self.") and isinstance(b.value, cst.Call)
                    and index.qualify(b.value.func) in WRITERS for b in index.bindings):
                found |= {name, scope.class_name}
                continue
            made = {b.target for b in index.bindings if b.place.scope is scope and isinstance(b.value, cst.Call)
                    and index.qualify(b.value.func) in WRITERS}
            for node in descendants(scope.node):
                if isinstance(node, cst.Return) and node.value is not None and (
                        spell(node.value) in made
                        or isinstance(node.value, cst.Call) and index.qualify(node.value.func) in WRITERS):
                    found.add(name)
        return found
    return index.derived("rank_zero_writer_factories", find)


def _foreign_writer_classes(ctx: Context) -> set[str]:
    """The classes imported from a module of the project that this program does not hold (it has
    its own `__main__`) whose `__init__` makes a writer (`self.vis = Visdom(...)`), qualified as
    this file imports them (`utils.visualizer.Visualizer`)."""
    index = ctx.index
    folder = os.path.dirname(ctx.path)
    found: set[str] = set()
    seen: set[str] = set()  # each class's module read once
    for call in index.calls:
        spelled = spell(call.node.func) or ""
        qualified = index.qualify(call.node.func) or ""
        if spelled.split(".")[0] not in index.imports or spelled in index.classes or not spelled.rsplit(".", 1)[-1][:1].isupper():
            continue
        if qualified in seen:
            continue
        seen.add(qualified)
        init = foreign_method(folder, qualified, "__init__", ctx.read_module)
        if init is not None and any(isinstance(node, cst.Assign) and isinstance(node.value, cst.Call)
                                    and (spell(node.value.func) or "").rsplit(".", 1)[-1] in WRITER_CLASSES
                                    for node in descendants(init)):
            found.add(qualified)
    return found


def _factory_called(index: ScriptIndex, call: cst.Call, factories: set[str]) -> bool:
    """Whether `call` runs one of the writer `factories`: by name, or as a method (`self.summary.create_summary()`)."""
    spelled = index.qualify(call.func) or ""
    if spelled in factories:
        return True
    receiver, _, method = spelled.rpartition(".")
    return bool(receiver) and receiver.split(".")[0] not in index.imports and any(
        f.endswith(f".{method}") for f in factories if "." in f)


def _made_by(index: ScriptIndex, factories: set[str]) -> set[str]:
    """The names bound from a call of a writer factory (`self.writer = self.summary.create_summary()`)."""
    return {b.target for b in index.bindings if isinstance(b.value, cst.Call) and _factory_called(index, b.value, factories)}


def _bound_names(index: ScriptIndex, matches: Callable[[str], bool]) -> set[str]:
    return {
        b.target
        for b in index.bindings
        if isinstance(b.value, cst.Call) and matches(index.qualify(b.value.func) or "")
    }


def _sink_kind(index: ScriptIndex, call: CallSite, loggers: set[str], writers: set[str], runs: set[str]) -> str | None:
    name = call.name or ""
    owner, _, method = name.rpartition(".")
    if name in ("print", "tqdm.tqdm.write", "sys.stdout.write"):
        return "print"
    if method == "write" and owner in _progress_bars(index):  # `pbar.write(...)`: tqdm prints it on every rank
        return "print"
    if (owner == "logging" or owner in loggers) and method in LOG_METHODS:
        return "print"
    if name.split(".")[-1] in ("tqdm", "trange") and name.startswith("tqdm"):
        return "progress"
    if name in WRITERS or name == "wandb.init":
        return "create"
    if (owner in writers or owner in runs) or (owner == "wandb" and method in WANDB_CALLS):
        return "write"
    if name in SAVES or name.endswith(".savefig"):
        return "write"
    if method in TABLE_WRITES and owner and owner.split(".")[0] not in index.imports and table_file(call.node) is not None:
        return "write"  # `train_df.to_csv("train.csv", index=None)`
    if _is_foreign_saver(index, name):
        return "foreign"
    return None


def _progress_bars(index: ScriptIndex) -> set[str]:
    """The names bound to a tqdm bar: `pbar = tqdm(...)`, `with tqdm(...) as pbar:`."""
    def is_bar(qualified: str) -> bool:
        return qualified.startswith("tqdm") and qualified.split(".")[-1] in ("tqdm", "trange")

    def find() -> set[str]:
        names = _bound_names(index, is_bar)
        for node in descendants(index.module):
            if isinstance(node, cst.WithItem) and isinstance(node.item, cst.Call) and node.asname is not None:
                if is_bar(index.qualify(node.item.func) or "") and isinstance(node.asname.name, cst.Name):
                    names.add(node.asname.name.value)
        return names

    return index.derived("progress_bars", find)


def _saves_image(index: ScriptIndex, call: CallSite, images: set[str]) -> bool:
    """`img.save(path)` of a PIL image, `ani.save(path)` of a matplotlib animation, the same saved
    where it is made (`Image.fromarray(a).save(path)`), and `path.write_text(...)` /
    `path.write_bytes(...)` (pathlib)."""
    owner, _, method = (call.name or "").rpartition(".")
    func = call.node.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "save":
        return owner in images or isinstance(func.value, cst.Call) and _makes_image(index, func.value)
    return func.attr.value in PATH_WRITES


def _makes_image(index: ScriptIndex, value: cst.Call) -> bool:
    """A call that makes an image: `Image.open(p)`, `Image.fromarray(a)`, `ToPILImage()(t)`, or a
    method chained on one (`Image.open(p).convert("L").resize(s)`)."""
    node: cst.BaseExpression = value
    while isinstance(node, cst.Call):
        qualified = index.qualify(node.func)
        if qualified is not None:
            return qualified.startswith(IMAGE_MAKERS)
        node = node.func.value if isinstance(node.func, cst.Attribute) else node.func
    return False


def _is_foreign_saver(index: ScriptIndex, name: str) -> bool:
    """`save_checkpoint(...)` from another module of the user's (imported, or via `import *`)."""
    last = name.rsplit(".", 1)[-1].lower()
    if not any(word in last for word in ("save", "checkpoint")) or name in index.functions:
        return False
    head = name.split(".")[0]
    if head in ("torch", "self") or head in BUILTIN_NAMES or "." in name and bool(index.bindings_of(head)):
        return False
    return not name.startswith(("numpy.", "json.", "pickle.", "os.", "shutil."))


def _guard_statement(ctx: Context, call: CallSite, kind: str) -> None:
    stmt = call.place.stmt
    suite = _one_line_suite_holding(stmt, call.node)
    if suite is not None and kind == "print":
        _guard_in_one_line_suite(ctx, stmt, suite, call)
        return
    if not _is_own_statement(stmt, call.node):
        return
    if not may_guard(ctx, stmt):
        if kind == "print" or kind in ("write", "foreign") and after_teardown(ctx, stmt):
            _guard_outside_group(ctx, stmt)
        return
    written = foreign_file_write(ctx, call) if kind == "foreign" else None
    if _may_be_collective(ctx, call.node) and not (written is not None and _handed_the_module(ctx, call)):
        if kind == "print" and not _compute_then_print(ctx, call):
            ctx.report("MIG112", f"this print computes a value that {_need(ctx)}; left printing on every rank", call.node)
        elif kind == "write" and _writes_through_handle(ctx, call):
            _compute_then_print(ctx, call)  # else: left on every rank, and _settle_handles says so
        elif written is not None:
            ctx.report("MIG120", f"`{ctx.code(call.node.func)}(...)` of {written.path} writes files (`{written.code}`), and it "
                       f"{_joins(ctx)} that every rank must join: left on every rank, so every rank "
                       f"writes the same files; {written.path} has its own `__main__` block, so the conversion does not "
                       f"edit it: guard its writes there with `if {ctx.launcher_rank_test()}:`", call.node)
        return
    ctx.plan.guard(stmt, ctx.rank_zero_test())
    if written is not None:
        ctx.report("MIG106", f"`{ctx.code(call.node.func)}(...)` of {written.path} writes files (`{written.code}`): it now "
                   "runs on rank 0 only", call.node)
    elif kind == "foreign":
        ctx.report("MIG106", f"`{ctx.code(call.node.func)}(...)` comes from another module: it now runs on rank 0 only, "
                   "assuming it just writes files; if it runs collectives, call it on every rank", call.node)


def _handed_the_module(ctx: Context, call: CallSite) -> bool:
    """Whether each model `call` is handed goes as the wrapper's `.module` (steps.wrap_model routed
    it), whose forward joins no other rank (DDP; DeepSpeed below ZeRO-3)."""
    wrapper = ctx.wrapper
    if wrapper is None or not wrapper.through_module or wrapper.zero3_partitions and zero_stage(ctx.options) == 3:
        return False
    models = {m.spelling for m in ctx.sites.models}
    handed = [arg.value for arg in call.node.args if spell(arg.value) in models]
    return bool(handed) and all(value in ctx.plan.replacements for value in handed)


@dataclass(frozen=True)
class ForeignWrite:
    """A file write in a function of another module of the project (one the program does not hold)."""

    path: str  # the module's file, relative to the script's folder
    code: str  # the write, as written there


# calls that write a file, by their last name: matplotlib, OpenCV, imageio, torchvision, pickle/json/numpy/torch
FILE_WRITES = frozenset({"savefig", "imwrite", "imsave", "save_image", "dump", "save", "savez", "savetxt", "to_csv"})


def foreign_file_write(ctx: Context, call: CallSite) -> ForeignWrite | None:
    """The first file write in the function `call` runs when that function comes from a module of
    the project the program does not hold (`from tools.inference import visualize_latent_space`,
    whose module has its own `__main__`): its result unused, so it only writes, prints or shows."""
    head = spell(call.node.func) or ""
    if not head or head in ctx.index.functions or head.split(".")[0] not in ctx.index.imports:
        return None
    if not (call.name or "").split(".")[0] or (call.name or "").startswith(("torch.", "numpy.", "os.", "matplotlib.")):
        return None
    return ctx.index.answer("foreign_file_write", call.name, lambda: _first_write(ctx, call))


def _first_write(ctx: Context, call: CallSite) -> ForeignWrite | None:
    folder = os.path.dirname(ctx.path)
    for callee in foreign_callees(ctx.index, call):
        found = foreign_function(folder, callee, ctx.read_module)
        if found is None:
            continue
        path, function = found
        for node in descendants(function.body):
            if isinstance(node, cst.Call) and (spell(node.func) or "").rsplit(".", 1)[-1] in FILE_WRITES:
                return ForeignWrite(os.path.relpath(path, folder), cst.Module([]).code_for_node(node).split("\n")[0])
    return None


def _guard_outside_group(ctx: Context, stmt: cst.BaseStatement) -> None:
    """A print or log line that runs before setup (at import, or before `main()` sets the group up)
    or after teardown, or a write after teardown (`torch.save`, `plt.savefig` once `main()` has
    returned): `dist.get_rank()` cannot tell the rank there, the launcher's RANK can."""
    index = ctx.index
    if under_rank_check(ctx, stmt):
        return
    if ctx.sites.entry is None or ctx.sites.entry.library or runs_in_process_group(index, ctx.sites.entry, stmt):
        return
    ctx.plan.guard(stmt, launcher_rank_zero_test(ctx, stmt))


def after_teardown(ctx: Context, stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` runs at module level after the process group is gone: after teardown in the
    entry block, or after the statement that calls the training function (`model = main()`)."""
    entry, index = ctx.sites.entry, ctx.index
    scope = index.scope_of.get(stmt)
    if entry is None or entry.library or scope is None or not scope.is_module:
        return False
    for around in index.enclosing_statements(stmt):
        located = index.block_of.get(around)
        if located is None:
            continue
        block, position = located
        if block is entry.block:
            end = index.block_of.get(entry.teardown_after) if entry.teardown_after is not None else None
            return end is not None and end[0] is block and position > end[1]
        if not entry.scope.is_module and any(
                entry.scope.name in {spell(c.func) for c in calls_in(earlier)} for earlier in block.body[:position]):
            return True
    return False


def _one_line_suite_holding(stmt: cst.BaseStatement, call: cst.Call) -> cst.SimpleStatementSuite | None:
    """`except ImportError: ok = False; print(...)`: the one-line body the print stands in."""
    if not isinstance(stmt, cst.BaseCompoundStatement):
        return None
    for node in descendants(stmt):
        if isinstance(node, cst.SimpleStatementSuite) and any(
                isinstance(small, cst.Expr) and small.value is call for small in node.body):
            return node
    return None


def _guard_in_one_line_suite(ctx: Context, stmt: cst.BaseStatement, suite: cst.SimpleStatementSuite, call: CallSite) -> None:
    """The one-line body becomes an indented block whose print line is guarded."""
    index = ctx.index
    if under_rank_check(ctx, stmt, itself=True):
        return
    if _may_be_collective(ctx, call.node):
        return
    if ctx.sites.entry is not None and runs_in_process_group(index, ctx.sites.entry, stmt):
        test = ctx.rank_zero_test()
    else:
        test = launcher_rank_zero_test(ctx, stmt)
    printing = next(small for small in suite.body if isinstance(small, cst.Expr) and small.value is call.node)

    def indent(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.SimpleStatementSuite)
        lines: list[cst.BaseStatement] = []
        # the print by identity: other steps may have removed statements before it from the suite
        position = next((i for i, small in enumerate(updated.body) if small is printing), suite.body.index(printing))
        for i, small in enumerate(updated.body):
            line: cst.BaseStatement = cst.SimpleStatementLine(body=[small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
            if i == position:
                line = cst.If(test=expression(test), body=cst.IndentedBlock(body=[line]))
            lines.append(line)
        return cst.IndentedBlock(body=lines, header=updated.trailing_whitespace)

    ctx.plan.replace(suite, indent)


def _is_own_statement(stmt: cst.BaseStatement, call: cst.Call) -> bool:
    """`print(...)` standing alone as a statement (not inside an expression)."""
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and stmt.body[0].value is call
    )


def may_guard(ctx: Context, stmt: cst.BaseStatement) -> bool:
    """Only where the process group exists (after setup, before teardown: `dist.get_rank()` raises
    elsewhere), and not already under a rank check."""
    return not under_rank_check(ctx, stmt) and runs_in_process_group(ctx.index, ctx.sites.entry, stmt)


def under_rank_check(ctx: Context, stmt: cst.BaseStatement, itself: bool = False) -> bool:
    """Whether an `if` around `stmt` (or `stmt` itself, with `itself`) already tests the rank, either
    way, by its text: looser than analysis.guards.on_rank_zero (what `migrate check` asks), kept so
    that conversions stay as they are."""
    around = ctx.index.enclosing_statements(stmt)[0 if itself else 1:]
    return any(isinstance(a, cst.If) and _names_a_rank(ctx.code(a.test)) for a in around)


def _names_a_rank(test: str) -> bool:
    """Whether a test's text names the rank (any case: `os.environ["RANK"]`), other than as a test
    of distributed-ness (`args.local_rank != -1`, true on every rank of a distributed run)."""
    lowered = test.lower()
    return any(w in lowered for w in RANK_WORDS) and not DISTRIBUTED_TEST.fullmatch(lowered.strip())


# `args.local_rank != -1`, `local_rank == -1`, `rank >= 0`: whether the run is distributed, not which rank
DISTRIBUTED_TEST = re.compile(r"[\w.\[\]'\"]*rank[\w.\[\]'\"]*\s*(?:(?:!=|==|>|<=)\s*-1|>=\s*0)")


def launcher_rank_zero_test(ctx: Context, stmt: cst.BaseStatement) -> str:
    """The rank-0 test where no process group exists yet (import time) or any more: the launcher's
    RANK. Horovod's own test after the training function returns, where its teardown waits at the
    end of the caller's block (see group_outlives_entry): horovodrun over MPI sets no HOROVOD_RANK,
    so the launcher's variable would make every rank rank 0."""
    if not ctx.modules_test_launcher_rank() and group_outlives_entry(ctx, stmt):
        return ctx.rank_zero_test()
    return ctx.launcher_rank_test()


def group_outlives_entry(ctx: Context, stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` runs after the training function returns, in its caller's block, where the
    teardown was moved to that block's end (the caller goes on using the model it returns): the
    runtime is still set up there."""
    entry = ctx.sites.entry
    if entry is None or entry.scope.is_module or not after_teardown(ctx, stmt):
        return False
    models = {site.spelling for site in ctx.sites.models if site.scope is entry.scope}
    place = caller_teardown(ctx.index, entry.scope, models)
    if not isinstance(place, tuple):
        return False
    block = ctx.index.block_of[place[0]][0]
    return any(ctx.index.block_of.get(around, (None, 0))[0] is block for around in ctx.index.enclosing_statements(stmt))


def _may_be_collective(ctx: Context, node: cst.CSTNode) -> bool:
    """Whether evaluating `node` could run a collective: for torch.distributed's wrappers, it calls or
    passes a model, or calls a function of this script (or a method on self) that mentions one or a
    torch.distributed call; where a forward joins no other rank (Horovod), see _joining_call."""
    return collective_call(ctx, node) is not None


def collective_call(ctx: Context, node: cst.CSTNode) -> cst.Call | None:
    """The first call under `node` that may run the wrapped model or a collective."""
    if ctx.runtime is not None and not ctx.runtime.forward_joins:
        return _joining_call(ctx, node)
    index = ctx.index
    models = {m.spelling for m in ctx.sites.models} | {m.spelling.removeprefix("self.") for m in ctx.sites.models}
    models |= {moved.spelling for site in ctx.sites.models for moved in moved_names(index, site)}  # m = model.to(d)
    for inner in calls_in(node):
        name = spell(inner.func) or ""
        serializes = (index.qualify(inner.func) or "") in SAVES  # `torch.save(model, path)` pickles it: no forward
        if name in models or (any(spell(a.value) in models for a in inner.args) and not _only_reads(name) and not serializes):
            return inner
        if _gathering_method(ctx, name, models):
            return inner
        if (index.qualify(inner.func) or "").startswith("torch.distributed."):
            return inner
        scope = index.functions.get(name) or index.functions.get(f"{name}.__init__")  # a class of this file: its __init__
        scope = scope or _method_of_instance(ctx, inner, name)  # `fitter.one_pass()` on `fitter = Fitter(...)`
        if scope is None and name.startswith("self.") and ctx.sites.models and not _runs_no_model(ctx, name):
            return inner
        if scope is not None and (_mentions(ctx, scope.node, models) or _trains(ctx, scope)):
            return inner
    return None


# What a method of an attribute reads without running a forward (besides a module's NO_FORWARD)
READ_METHODS = frozenset({"get_lr", "get_last_lr"})


def _runs_no_model(ctx: Context, name: str) -> bool:
    """Whether a call on `self` runs no model: a method that runs no forward called on one of its
    attributes (`self.net.state_dict()`, `self.scheduler.get_last_lr()`: not a method of the
    class that this file may not show), or any call of an attribute bound to an output handle
    (`self.writer.add_scalar(...)` of `self.writer = SummaryWriter()`, a logger, a wandb run). A
    method of the wrapped model that may gather is caught before (`_gathering_method`)."""
    owner, _, method = name.rpartition(".")
    if owner == "self":  # `self.evaluate()`: a method the file may not show, which may run the model
        return False
    return method in NO_FORWARD or method in READ_METHODS or owner in output_handles(ctx)


def output_handles(ctx: Context) -> set[str]:
    """The names bound to an output handle: a SummaryWriter, a logger, a wandb run."""
    def build() -> set[str]:
        made = _bound_names(ctx.index, lambda q: q in WRITERS or q == "wandb.init" or q.endswith("getLogger"))
        return made | _made_by(ctx.index, writer_factories(ctx.index, ctx.sites.training_scopes))

    return ctx.index.derived("rank_zero_output_handles", build)


def _method_of_instance(ctx: Context, call: cst.Call, name: str) -> Scope | None:
    """The method of this file's class that `owner.method(...)` calls, where `owner` is bound to an
    instance of that class in the call's scope (`fitter = Fitter(model)`), or `self.owner` in the
    class's own methods (`self.summary = TensorboardSummary(...)`)."""
    owner, _, method = name.rpartition(".")
    site = ctx.index.call_site(call)
    if not owner or site is None:
        return None
    if owner.startswith("self.") and owner.count(".") == 1 and site.place.scope.class_name:
        bindings = ctx.index.bindings_of_in_class(owner, site.place.scope.class_name)
        made = {spell(b.value.func) for b in bindings if isinstance(b.value, cst.Call)}
        cls = made.pop() if len(made) == 1 else None
        return ctx.index.functions.get(f"{cls}.{method}") if cls in ctx.index.classes else None
    if "." in owner:
        return None
    cls = class_of_binding(ctx.index, owner, site.place.scope)
    return ctx.index.functions.get(f"{cls}.{method}") if cls is not None else None


def _trains(ctx: Context, scope: Scope) -> bool:
    """Whether the function runs a backward pass, itself or through the functions it calls (every
    rank must: the gradients are all-reduced)."""
    return scope.name in ctx.sites.training_scopes


def _joins(ctx: Context) -> str:
    """What a value that may need every rank does, in the target's terms."""
    if ctx.runtime is not None and not ctx.runtime.forward_joins:
        return "may run a backward pass or a collective"
    return "may run the model"


JOINS_OUTSIDE_FORWARD = ("torch.distributed.", "horovod.")  # a call of these modules joins every rank


def _joining_call(ctx: Context, node: cst.CSTNode) -> cst.Call | None:
    """A runtime whose forward joins no other rank (Horovod): the first call under `node` that is
    a collective itself, a backward or an optimizer step (the all-reduces), or a call of the
    script's own function that runs one of these (see _joining_functions)."""
    index = ctx.index
    joining = _joining_functions(ctx)
    for inner in calls_in(node):
        name = spell(inner.func) or ""
        if (index.qualify(inner.func) or "").startswith(JOINS_OUTSIDE_FORWARD) or id(inner) in _joining_nodes(ctx):
            return inner
        if name.rsplit(".", 1)[-1] in joining:  # `train(...)`, `Trainer(...)`, `self.fit()`, `agent.learn()`
            return inner
    return None


def _joining_nodes(ctx: Context) -> set[int]:
    """Backward calls and optimizer steps (Horovod all-reduces in both), and loads of a state dict
    (a resumed optimizer's state is broadcast after its load)."""
    def build() -> set[int]:
        nodes = {id(b.node) for b in ctx.sites.backward_calls} | {id(s.step.node) for s in ctx.sites.stepped}
        return nodes | {id(c.node) for c in ctx.index.calls
                        if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "load_state_dict"}

    return ctx.index.derived("rank_zero_joining_nodes", build)


def _joining_functions(ctx: Context) -> set[str]:
    """Last parts of the names of the script's functions (and classes, by `__init__`) that join
    every rank: they hold a collective call, a backward, a step, a load, or a model's wrap site (its
    broadcast goes there), directly or through another of them."""
    def build() -> set[str]:
        index = ctx.index
        wraps = {id(s) for site in ctx.sites.models for s in (site.wrap_after, site.wrap_before) if s is not None}
        nodes = _joining_nodes(ctx) | wraps

        def joins_itself(scope: Scope) -> bool:
            return any(id(n) in nodes for n in descendants(scope.node)) or any(
                (index.qualify(c.func) or "").startswith(JOINS_OUTSIDE_FORWARD) for c in calls_in(scope.node))

        def short(name: str) -> str:
            return name.removesuffix(".__init__").rsplit(".", 1)[-1]

        scopes = {name: scope for name, scope in index.functions.items() if not scope.is_module}
        joining = {short(name) for name, scope in scopes.items() if joins_itself(scope)}
        changed = True
        while changed:
            before = len(joining)
            joining |= {short(name) for name, scope in scopes.items()
                        if any((spell(c.func) or "").rsplit(".", 1)[-1] in joining for c in calls_in(scope.node))}
            changed = len(joining) != before
        return joining

    return ctx.index.derived("rank_zero_joining_functions", build)


# Methods of a module that run no forward: everything else called on a model that keeps its class
# when sharded (FSDP2: `model.generate(...)`, registered to gather the weights) may gather.
NO_FORWARD = frozenset({"parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
                        "modules", "named_modules", "train", "eval", "state_dict", "zero_grad", "to", "cpu", "cuda",
                        "extra_repr", "requires_grad_", "apply", "register_forward_hook", "register_forward_pre_hook"})


def _gathering_method(ctx: Context, name: str, models: set[str]) -> bool:
    """`model.generate(...)` (or `m.generate(...)` for `m = model.to(device)`) where the wrapper keeps
    the model's class (no `.module` to go around it), or where the module's own layers gather their
    weights (DeepSpeed at --zero 3: the engine's hooks sit on the user's submodules)."""
    owner, _, method = name.rpartition(".")
    wrapper = ctx.wrapper
    gathers = wrapper is not None and (not wrapper.through_module or wrapper.zero3_partitions and zero_stage(ctx.options) == 3)
    return gathers and method not in NO_FORWARD and (owner in models or owner in _model_aliases(ctx))


def _model_aliases(ctx: Context) -> set[str]:
    """Every name the trained models go by, in any scope."""
    def names() -> set[str]:
        sites = [each for site in ctx.sites.models for each in (site, *moved_names(ctx.index, site))]
        return {name for site in sites for name, _scope in aliases(ctx.index, site)}

    return ctx.index.derived("rank_zero_model_aliases", names)


# Handed a model, these only read or format it (`print(model)` shows its layers): no forward runs.
READS_ONLY = frozenset({"print", "str", "repr", "format", "len", "type", "id", "isinstance", "hasattr", "getattr", "vars"})


def _only_reads(name: str) -> bool:
    return name in READS_ONLY or name.rsplit(".", 1)[-1] in LOG_METHODS and "." in name


def _mentions(ctx: Context, node: cst.CSTNode, names: set[str]) -> bool:
    dist = ctx.index.imports
    dist_names = {local for local, qualified in dist.items() if qualified == "torch.distributed"}
    return not ctx.index.names_under(node).isdisjoint(names | dist_names)


def _writes_through_handle(ctx: Context, call: CallSite) -> bool:
    """`writer.add_scalar(...)` on an output handle (a SummaryWriter, a wandb run), or `wandb.log(...)`."""
    owner, _, method = (call.name or "").rpartition(".")
    return owner in output_handles(ctx) or owner == "wandb" and method in WANDB_CALLS


def _compute_then_print(ctx: Context, call: CallSite) -> bool:
    """`print("loss", evaluate(model))` -> the values that may run the model computed on every rank
    first (`message = evaluate(model)`), then printed on rank 0: `print("loss", message)`; the same
    for a writer's call (`writer.add_scalar("acc", evaluate(model), step)`). Both are built from the
    call as the other steps edited it (`model.encoder` -> `model.module.encoder` inside it stays),
    not from the original text. False, with nothing edited, where the values cannot be taken out
    (a keyword or starred argument that may need every rank)."""
    args = list(call.node.args)
    hoisted = [i for i, a in enumerate(args) if a.keyword is None and _may_be_collective(ctx, a.value)]
    if not hoisted or any(a.star for a in args) or any(_may_be_collective(ctx, a.value) for a in args if a.keyword):
        return False
    names = {i: "message" if n == 0 else f"message_{n + 1}" for n, i in enumerate(hoisted)}
    stmt = call.place.stmt
    computed = [statement(f"{names[i]} = {names[i]}  # computed on every rank: it {_joins(ctx)}\n") for i in hoisted]
    computed[0] = computed[0].with_changes(leading_lines=getattr(stmt, "leading_lines", ()))
    inserted: list[bool] = []

    def hoist(updated: cst.CSTNode) -> cst.CSTNode:
        """Runs when the plan is applied, after every edit inside the call: the edited values go
        into the assignments placed before the statement, their names into the print."""
        assert isinstance(updated, cst.Call)
        edited = list(updated.args)
        if not inserted:  # once, however often the edit runs
            inserted.append(True)
            ctx.plan.insert_before(stmt, [_assigned(line, edited[i].value) for line, i in zip(computed, hoisted)])
        for i in hoisted:
            edited[i] = edited[i].with_changes(value=cst.Name(names[i]))
        return updated.with_changes(args=edited)

    ctx.plan.replace(call.node, hoist)
    if getattr(stmt, "leading_lines", ()):
        ctx.plan.replace(stmt, lambda updated: updated.with_changes(leading_lines=()))
    ctx.plan.guard(stmt, ctx.rank_zero_test())
    return True


def _assigned(line: cst.BaseStatement, value: cst.BaseExpression) -> cst.BaseStatement:
    """`message = <value>`: the parsed assignment line with its value put in."""
    assert isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Assign)
    return line.with_changes(body=[line.body[0].with_changes(value=value)])


def _need(ctx: Context) -> str:
    if ctx.runtime is not None and not ctx.runtime.forward_joins:
        return "may run a backward pass or a collective, which every rank must join"
    return "may need every rank"


def _disable_progress_bar(ctx: Context, call: CallSite) -> None:
    if not runs_in_process_group(ctx.index, ctx.sites.entry, call.place.stmt):
        return
    test = ctx.rank_zero_test(in_module=ctx.in_other_module(call.node), other_ranks=True)  # as a module's guards (issue 27)

    def add_disable(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        for position, arg in enumerate(updated.args):
            if arg.keyword is not None and arg.keyword.value == "disable":
                args = list(updated.args)
                args[position] = arg.with_changes(value=expression(f"({ctx.code(arg.value)}) or {test}"))
                return updated.with_changes(args=args)
        return with_keyword(updated, "disable", expression(test))

    ctx.plan.replace(call.node, add_disable)


def _create_on_rank_zero(ctx: Context, call: CallSite) -> None:
    """`writer = SummaryWriter(...)` -> `... if rank 0 else None`; a bare `wandb.init()` is guarded.

    When the wandb run is read on every rank later (`config = wandb.config`, `run.summary[...]`,
    `run.name`), it must exist on every rank: the other ranks start it with `mode="disabled"`,
    wandb's own no-op run, which holds the same config and accepts every call."""
    stmt = call.place.stmt
    if call.name == "wandb.init" and may_guard(ctx, stmt):
        read = _wandb_read_elsewhere(ctx, call)
        if read is not None:
            _disabled_elsewhere(ctx, call)
            return
    if _is_own_statement(stmt, call.node):
        if may_guard(ctx, stmt):
            ctx.plan.guard(stmt, ctx.rank_zero_test())
        return
    if not may_guard(ctx, stmt):
        return
    ctx.recorded(RankZeroHandles, create=True).calls.append(call)  # made on rank 0 only by _settle_handles


@dataclass
class RankZeroHandles:
    """Calls that make a handle on rank 0 only (`writer = SummaryWriter() if rank 0 else None`)."""

    calls: list[CallSite] = field(default_factory=list)


def _settle_handles(ctx: Context) -> None:
    """Each handle a call makes (`self.writer = SummaryWriter()`) is made on rank 0 only (`... if
    rank 0 else None`) where every statement that reads it outside its moved calls
    (`logging.basicConfig(filename=os.path.join(self.writer.log_dir, "x.log"))`,
    `save_config(self.writer.log_dir)`), and every statement that reads a name such a statement
    binds (`log_dir = self.writer.log_dir` ... `open(log_dir + "/a")`), can run on rank 0 too: those
    are guarded. Where one cannot (it returns, leaves a loop, or may need every rank), the handle is
    made on every rank, and MIG120 names that read: the other ranks would find None there."""
    for create in ctx.recorded(RankZeroHandles, create=True).calls:
        readers, blocked = _handle_readers(ctx, create)
        if blocked is not None:
            stmt, node, origin, why = blocked
            made = ctx.code(create.node).strip().splitlines()[0]
            bound = f" (bound from `{ctx.code(origin)}`, line {ctx.position(origin)[0]})" if origin is not None else ""
            ctx.report("MIG120", f"`{made}` is left on every rank: `{_first_line(ctx, stmt)}` reads `{ctx.code(node)}`"
                       f"{bound} and cannot run on rank 0 alone ({why}): made on rank 0 only, it would be None there "
                       "on the other ranks; so each rank makes its own, and the calls moved to rank 0 still write once",
                       node)
            continue
        test = ctx.rank_zero_test()
        for stmt in readers:
            ctx.plan.guard(stmt, test)
        whole = any(b.value is create.node for b in ctx.index.bindings)
        ctx.plan.replace(create.node, lambda updated: _made_on_rank_zero(updated, test, parenthesized=not whole))


def _made_on_rank_zero(updated: cst.CSTNode, test: str, parenthesized: bool = False) -> cst.CSTNode:
    """`SummaryWriter(...)` -> `SummaryWriter(...) if <test> else None`; in parentheses inside a
    larger expression (`(SummaryWriter() if <test> else None) if args.tb else None`: without them,
    Python reads `... else (None if args.tb else None)`)."""
    assert isinstance(updated, cst.BaseExpression)
    made = cst.IfExp(test=expression(test), body=updated, orelse=cst.Name("None"))
    return made.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if parenthesized else made


# a statement that cannot move to rank 0, what it reads, the read of the handle that read comes from
# (None where it reads the handle itself), and why
ReaderProblem = tuple[cst.BaseStatement, cst.CSTNode, cst.CSTNode | None, str]


def _handle_readers(ctx: Context, create: CallSite) -> tuple[list[cst.BaseStatement], ReaderProblem | None]:
    """The statements that read the handle `create` makes (or a name bound from it, transitively)
    and do not run on rank 0 already; or the first that cannot be put there, with what it reads and why."""
    index = ctx.index
    pending: list[tuple[str, Scope, cst.CSTNode | None]] = [
        (b.target, b.place.scope, None) for b in index.bindings if b.value is create.node]
    pending += [entry for name, scope, _ in pending for entry in _on_instances(index, name, scope)]
    seen: set[str] = set()
    readers: list[cst.BaseStatement] = []
    while pending:
        name, scope, origin = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        for stmt, node in _reads_of(ctx, name, scope):
            if stmt is create.place.stmt or stmt in readers or runs_on_rank_zero(ctx, stmt) or _inside_any(ctx, stmt, readers):
                continue
            why = _why_not_on_rank_zero(ctx, stmt)
            if why is not None:
                return readers, (stmt, node, origin, why)
            readers.append(stmt)
            inner = [s for s in descendants(stmt) if isinstance(s, cst.BaseStatement)]
            pending += [(b.target, b.place.scope, origin or node) for s in inner for b in index.bindings_at(s)]
    return readers, None


def _on_instances(index: ScriptIndex, name: str, scope: Scope) -> list[tuple[str, Scope, cst.CSTNode | None]]:
    """`trainer.writer` in the scope of `trainer = Trainer(args)`, for `self.writer` bound in a
    method of Trainer: the same handle, read from outside the class (`trainer.writer.close()`)."""
    if not name.startswith("self.") or name.count(".") != 1 or not scope.class_name:
        return []
    attribute = name.removeprefix("self.")
    return [(f"{b.target}.{attribute}", b.place.scope, None) for b in index.bindings
            if isinstance(b.value, cst.Call) and spell(b.value.func) == scope.class_name and "." not in b.target]


def _inside_any(ctx: Context, stmt: cst.BaseStatement, outer: list[cst.BaseStatement]) -> bool:
    return any(a in outer for a in ctx.index.enclosing_statements(stmt)[1:])


def _reads_of(ctx: Context, name: str, scope: Scope) -> list[tuple[cst.BaseStatement, cst.CSTNode]]:
    """Where `name` (`writer`, `self.writer`) is read, bound in `scope`: each statement (a compound
    one by its header) and the expression that reads it (`self.writer.log_dir`; the name itself
    where it is handed on, `log(self.writer)`). Not a test of it (`if writer is not None:`): None
    is read fine there. `self.x` is read in every method of the class; a module-level name in every
    function that does not bind it; any other in its own scope."""
    index = ctx.index
    if name.startswith("self."):
        scopes = [s for s in index.functions.values() if not s.is_module and s.class_name == scope.class_name]
    elif scope.is_module:
        scopes = [s for s in index.functions.values() if s.is_module or not index.bindings_of_in(name, s)]
    else:
        scopes = [scope]
    last = name.rsplit(".", 1)[-1]
    within = {id(each) for each in scopes}
    # a statement's own reads, and `name.attr` in a one-line body (`if c: writer.add_scalar(...)`)
    candidates = {id(stmt): stmt for each in scopes for stmt in index.readers_in(each).get(last, ())}
    candidates.update({id(use.place.stmt): use.place.stmt for use in index.attributes
                       if use.owner == name and id(use.place.scope) in within})
    found: list[tuple[cst.BaseStatement, cst.CSTNode]] = []
    for stmt in sorted(candidates.values(), key=lambda s: ctx.position(s)):
        node = next((n for part, test in _read_parts(stmt) for n in _spelled(part, name, test)), None)
        if node is not None:
            found.append((stmt, node))
    return found


def _read_parts(stmt: cst.BaseStatement) -> list[tuple[cst.CSTNode, bool]]:
    """What a statement itself reads, each part with whether it is a test: a compound statement's
    header; a simple one whole, but the targets of its assignments that only bind (`self.writer =
    None`)."""
    suites: list[tuple[cst.CSTNode, bool]] = [  # `if c: writer.flush()`: its one-line body
        (small, False) for node in child_nodes(stmt) if isinstance(node, cst.SimpleStatementSuite) for small in node.body]
    if isinstance(stmt, (cst.If, cst.While)):
        return [(stmt.test, True), *suites]
    if isinstance(stmt, cst.For):
        return [(stmt.iter, False), *suites]
    if isinstance(stmt, cst.With):
        return [*((item, False) for item in stmt.items), *suites]
    if not isinstance(stmt, cst.SimpleStatementLine):
        return suites
    parts: list[cst.CSTNode] = []
    for small in stmt.body:
        if isinstance(small, cst.Assign):
            parts += [small] + [t.target for t in small.targets if spell(t.target) is None]
        elif isinstance(small, cst.AnnAssign):
            parts += [small] if small.value is not None else []
        else:
            parts.append(small)
    return [(part, False) for part in parts]


def _spelled(part: cst.CSTNode, name: str, test: bool) -> list[cst.CSTNode]:
    """The reads of `name` under `part` that None would break: `name.attr` (the attribute), and
    unless `part` is a test, `name` handed to a call, bound again or returned; not `name` tested
    (`if name:`, `name is None`)."""
    found: list[cst.CSTNode] = []
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(part, None)]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)) and spell(node) == name:
            if isinstance(parent, cst.Attribute) and parent.value is node:
                found.append(parent)
            elif not test and isinstance(parent, (cst.Arg, cst.Assign, cst.Element, cst.DictElement, cst.Return)):
                found.append(node)
            continue
        if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.AssignTarget)):
            continue
        stack += [(child, node) for child in child_nodes(node)]
    return found


def _why_not_on_rank_zero(ctx: Context, stmt: cst.BaseStatement) -> str | None:
    """Why `stmt` cannot be guarded by the rank-0 test (words for the finding); None when it can."""
    for node in descendants(stmt):
        if isinstance(node, cst.Return):
            return "it returns"
        if isinstance(node, (cst.Break, cst.Continue)):
            return "it leaves a loop"
        if isinstance(node, (cst.Yield, cst.Raise)):
            return "it yields" if isinstance(node, cst.Yield) else "it raises"
    if not may_guard(ctx, stmt):
        return "it runs before the process group is set up or after it is gone"
    collective = collective_call(ctx, stmt)
    if collective is not None:
        return f"`{ctx.code(collective.func)}(...)` in it {_joins(ctx)}"
    return None


def _first_line(ctx: Context, stmt: cst.BaseStatement) -> str:
    lines = [line.strip() for line in ctx.code(stmt).splitlines()]
    return next((line for line in lines if line and not line.startswith("#")), "").rstrip(":")


def runs_on_rank_zero(ctx: Context, stmt: cst.BaseStatement) -> bool:
    """Whether the statement (or one around it) runs on rank 0 only: guarded by the conversion or
    by the script itself."""
    return any(a in ctx.plan.guarded for a in ctx.index.enclosing_statements(stmt)) or under_rank_check(ctx, stmt, itself=True)


WANDB_STATE = frozenset({"config", "run", "summary"})


def _wandb_read_elsewhere(ctx: Context, init: CallSite) -> cst.BaseStatement | None:
    """A statement that reads the run (its handle, `wandb.config`, `wandb.run`, `wandb.summary`)
    other than the logging calls that are themselves moved to rank 0."""
    index = ctx.index
    wandb = {local for local, qualified in index.imports.items() if qualified == "wandb"}
    handles = {b.target for b in index.bindings if b.value is init.node}
    for use in index.attributes:
        owner = use.owner
        reads_state = owner in wandb and use.node.attr.value in WANDB_STATE
        if not (reads_state or owner in handles) or use.place.stmt is init.place.stmt:
            continue
        if _logging_statement(index, use.place.stmt, wandb, handles):
            continue
        return use.place.stmt
    return None


def _logging_statement(index: ScriptIndex, stmt: cst.BaseStatement, wandb: set[str], handles: set[str]) -> bool:
    """`wandb.log(...)` / `run.log(...)` / `run.finish()` standing alone: moved to rank 0 anyway."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return False
    call = stmt.body[0].value
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
        return False
    owner = spell(call.func.value)
    return (owner in handles or owner in wandb) and call.func.attr.value in WANDB_CALLS and not any(
        isinstance(a.value, cst.Attribute) and spell(a.value.value) in wandb | handles for a in call.args
    )


def _disabled_elsewhere(ctx: Context, init: CallSite) -> None:
    """`wandb.init(...)` -> `wandb.init(..., mode=<theirs or None> if rank 0 else "disabled")`."""
    test = ctx.rank_zero_test()
    given = next((a for a in init.node.args if a.keyword is not None and a.keyword.value == "mode"), None)

    def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        if given is not None:
            args = [
                a.with_changes(value=expression(f'{ctx.code(given.value)} if {test} else "disabled"')) if a.keyword is not None and a.keyword.value == "mode" else a
                for a in updated.args
            ]
            return updated.with_changes(args=args)
        return with_keyword(updated, "mode", expression(f'None if {test} else "disabled"'))

    ctx.plan.replace(init.node, rewrite)


def _opens_for_writing(index: ScriptIndex, stmt: cst.With) -> bool:
    """`with open(path, "w")` / `open(path, mode="wb")` (also "a", "x" and "+" modes), and any other
    opener given such a mode: `bz2.open(path, "wb")`, `gzip.open(...)`, `lzma.open(...)` (each rank
    would open the file, truncating it, even where only rank 0 writes into it)."""
    for item in stmt.items:
        call = item.item
        if isinstance(call, cst.Call):
            mode = opener_mode(index, call)
            if mode is not None and writes_in_mode(mode):
                return True
    return False


may_be_collective = _may_be_collective  # shared with the steps that guard file writes
