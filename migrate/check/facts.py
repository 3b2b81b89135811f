"""What several check rules read about one script: its index, every call with its name resolved
through all of the file's imports, which frameworks it initialises, the names bound to a
distributed wrapper, and where a node is (line and column); and the parse that builds it
(`parse_script`: Python's own syntax check first, then libcst)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from migrate.analysis.index import Binding, CallSite, ScriptIndex, build_index, spell
from migrate.analysis.positions import Positions
from migrate.records import InputError
from migrate.sources import check_memory

PROCESS_GROUP_INITS = ("torch.distributed.init_process_group",)
DEEPSPEED_INITS = ("deepspeed.initialize", "deepspeed.init_distributed")
DDP_WRAPPERS = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
                "torch.nn.DistributedDataParallel")
FSDP1_WRAPPERS = ("torch.distributed.fsdp.FullyShardedDataParallel",
                  "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel")
FULLY_SHARD = ("torch.distributed.fsdp.fully_shard", "torch.distributed._composable.fsdp.fully_shard",
               "torch.distributed._composable.fsdp.fully_shard.fully_shard")
DATA_PARALLEL = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                 "torch.nn.parallel.data_parallel.DataParallel", "torch.nn.parallel.data_parallel")


@dataclass(frozen=True)
class Hit:
    """One place a rule found: a node of the script (or, for a file beside it, `where`)."""

    node: cst.CSTNode | None
    message: str
    where: tuple[str, int, int] | None = None  # (path, line, col) when the place is not in the script


@dataclass(eq=False)
class Script:
    """One parsed script and the facts the rules share, each computed on first use."""

    path: str
    code: str
    module: cst.Module
    index: ScriptIndex = field(init=False)

    def __post_init__(self) -> None:
        self.index = build_index(self.module)

    @cached_property
    def named_calls(self) -> list[tuple[CallSite, str]]:
        """Every call with its name resolved through all the file's imports ("" when unnamed)."""
        return [(call, self.index.qualify(call.node.func) or call.name or "") for call in self.index.calls]

    def calls_to(self, *names: str) -> list[CallSite]:
        return [call for call, name in self.named_calls if name in names]

    def calls_ending(self, suffix: str, prefix: str = "") -> list[CallSite]:
        """Calls whose resolved name ends with `suffix` (and starts with `prefix`)."""
        return [call for call, name in self.named_calls if name.endswith(suffix) and name.startswith(prefix)]

    def method_calls(self, method: str) -> list[CallSite]:
        """`anything.method(...)`."""
        return [c for c in self.index.calls if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == method]

    @cached_property
    def horovod(self) -> bool:
        return bool(self.horovod_inits)

    @cached_property
    def horovod_inits(self) -> list[CallSite]:
        return [call for call, name in self.named_calls if name.startswith("horovod.") and name.endswith(".init")]

    @cached_property
    def initialises(self) -> bool:
        """The script sets up a process group itself: torch.distributed, Horovod or DeepSpeed."""
        return bool(self.calls_to(*PROCESS_GROUP_INITS, *DEEPSPEED_INITS)) or self.horovod

    @cached_property
    def deepspeed(self) -> bool:
        return bool(self.calls_to(*DEEPSPEED_INITS))

    def wrapped_names(self, wrappers: tuple[str, ...]) -> list[Binding]:
        """The bindings whose value is a call to one of `wrappers` (`model = DDP(net)`)."""
        found = []
        for binding in self.index.bindings:
            value = binding.value
            if isinstance(value, cst.Call) and (self.index.qualify(value.func) or "") in wrappers:
                found.append(binding)
        return found

    def sharded_names(self) -> set[str]:
        """Names handed whole to `fully_shard(name)`."""
        return {spell(c.node.args[0].value) or "" for c in self.calls_to(*FULLY_SHARD) if c.node.args} - {""}

    @cached_property
    def positions(self) -> Positions:
        return Positions(self.module, self.code)

    def position(self, node: cst.CSTNode, within: cst.CSTNode | None = None) -> tuple[int, int]:
        return self.positions.of(node, within)

    def text(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def order(self, stmt: cst.BaseStatement) -> int:
        return self.index.statement_order().get(stmt, -1)


def argument(call: cst.Call, keyword: str, position: int | None = None) -> cst.BaseExpression | None:
    """The value given for a parameter, by keyword or by position (None when not given)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def is_literal(node: cst.BaseExpression | None, value: object) -> bool:
    """`True`, `False`, `None` or an integer literal equal to `value`."""
    if isinstance(node, cst.Name):
        return node.value == repr(value)
    if isinstance(node, cst.Integer):
        return isinstance(value, int) and not isinstance(value, bool) and int(node.value, 0) == value
    return False


def is_optimizer(name: str) -> bool:
    """`torch.optim.SGD`-like constructors (not schedulers, nor swa_utils' AveragedModel and SWALR)."""
    last = name.rsplit(".", 1)[-1]
    return name.startswith("torch.optim.") and "lr_scheduler" not in name and "swa_utils" not in name and \
        last[:1].isupper()


def parse_script(code: str, path: str) -> Script:
    """The parsed Script of a text; InputError, at its place, when it does not parse."""
    check_memory(path, code)  # libcst aborts the process when it runs out of memory
    _check_syntax(code, path)
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError as error:
        raise InputError(path, error.raw_line, error.raw_column + 1, f"syntax error: {error.message}") from None
    return Script(path=path, code=code, module=module)


def _check_syntax(code: str, path: str) -> None:
    """CPython's compiler first, so a syntax error reads as Python's own, at its place."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(code, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise InputError(path, error.lineno or 0, error.offset or 0, f"syntax error: {error.msg}") from None
    except ValueError as error:  # NUL bytes
        raise InputError(path, 0, 0, f"cannot be compiled: {error}") from None
