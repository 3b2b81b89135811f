"""What every step receives: the sites, the edit plan, the options, and small helpers to
spell new code (imports the script already has are reused under the script's own names); and the
target's model wrapper (`Wrapper`) the Context holds, which steps.wrap_model applies.
"""

from __future__ import annotations

import string
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol, TypeVar

import libcst as cst

from migrate.analysis.index import Scope, ScriptIndex
from migrate.analysis.positions import Positions
from migrate.analysis.program import Program
from migrate.analysis.sites import ModelSite, TrainingSites
from migrate.findings import finding
from migrate.records import Finding
from migrate.project_files import ReadModule, read_nothing
from migrate.rewrite import EditPlan
from migrate.runtime import Runtime
from migrate.steps.imports import ImportNames, import_names
from migrate.target_options import Options

Record = TypeVar("Record")

# Attributes the wrapper itself answers correctly: everything else goes to `.module`.
WRAPPER_SAFE = frozenset(
    {
        "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
        "modules", "named_modules", "train", "eval", "zero_grad", "to", "cuda", "cpu", "forward",
        "requires_grad_", "apply", "no_sync", "module", "training", "half", "float", "double",
        "bfloat16", "type", "join", "register_forward_hook", "register_forward_pre_hook",
        "register_full_backward_hook", "register_comm_hook",
    }
)


@dataclass(eq=False)
class Context:
    sites: TrainingSites
    plan: EditPlan
    options: Options
    runtime: Runtime | None = None  # the target's distributed runtime; None for a single process (DataParallel)
    wrapper: Wrapper | None = None  # the target's model wrapper
    source: str = ""  # the original text (findings' positions are read from it)
    script: str = "train.py"  # the file's name, for comments in generated code
    path: str = "train.py"  # the file's path as given: its folder holds the modules it imports
    read_module: ReadModule = read_nothing  # how the modules of that folder are read (migrate.project_files)
    findings: list[Finding] = field(default_factory=list)
    _positions: Positions | None = None
    _import_names: ImportNames | None = None
    device_name: str | None = None  # the entry scope's device variable, once known
    _code: dict[cst.CSTNode, str] = field(default_factory=dict)
    records: dict[type, object] = field(default_factory=dict)  # what steps tell later steps and the artifact makers, by type
    refused: bool = False  # a step found the script cannot be converted safely: leave it as it is
    hoisted_datasets: list[cst.BaseStatement] = field(default_factory=list)  # `ds = Dataset(...)` taken out of a DataLoader call
    program: Program | None = None  # the script with the modules of its project, when read as one (issue 27)

    @property
    def index(self) -> ScriptIndex:
        return self.sites.index

    # -- names of things the new code refers to ---------------------------------------------
    def module_name(self, module: str, alias: str | None = None) -> str:
        """The local name of `module`, importing it (as `alias`, or another free name) unless the
        script already imports it early enough at module level (see migrate.steps.imports)."""
        names = self.import_names
        local = names.reusable(module)
        if local is not None:
            return local
        if alias is None and "." in module:
            self.plan.add_import(f"import {module}")
            return module
        local = names.fresh(alias or module, module)
        self.plan.add_import(f"import {module}" if local == module else f"import {module} as {local}")
        return local

    def imported(self, module: str, name: str, alias: str | None = None) -> str:
        """The local name of `module.name`, importing it when the script does not (early enough)."""
        names = self.import_names
        qualified = f"{module}.{name}"
        local = names.reusable(qualified, private=True)
        if local is not None:
            return local
        local = names.fresh(alias or name, qualified)
        self.plan.add_import(f"from {module} import {name}" if local == name else f"from {module} import {name} as {local}")
        return local

    @property
    def import_names(self) -> ImportNames:
        """The script's imports that new code may reuse, and the names it binds (computed once)."""
        if self._import_names is None:
            entry = self.sites.entry
            setup = entry.setup_before if entry is not None and entry.scope.is_module else None
            setup_line = self.position(setup)[0] if setup is not None else None
            self._import_names = import_names(self.source, setup_line or None)
        return self._import_names

    @property
    def torch(self) -> str:
        return self.module_name("torch")

    # -- the target's runtime (see migrate.runtime) --------------------------------------------
    @property
    def distributed(self) -> Runtime:
        assert self.runtime is not None, "a step that needs a distributed runtime runs for a target without one"
        return self.runtime

    def spell(self, template: str) -> str:
        """A runtime template in this script's names, importing only the modules it uses."""
        runtime = self.distributed
        names: dict[str, str] = {}
        for _text, field_name, _spec, _conversion in string.Formatter().parse(template):
            if field_name is None or field_name in names:
                continue
            names[field_name] = self._spelled(field_name, runtime)
        return template.format_map(names)

    def _spelled(self, placeholder: str, runtime: Runtime) -> str:
        if placeholder == "m":
            return self.module_name(runtime.module, runtime.alias)
        if placeholder == "local_rank":
            return runtime.local_rank_name
        if placeholder in ("os", "torch"):
            return self.module_name(placeholder)
        module = next(m for m in runtime.modules if m.rsplit(".", 1)[-1] == placeholder)
        return self.module_name(module)

    def rank(self) -> str:
        return self.spell(self.distributed.rank)

    def world_size(self) -> str:
        return self.spell(self.distributed.world_size)

    def barrier(self) -> str:
        return self.spell(self.distributed.barrier)

    def rank_zero_test(self, in_module: bool = False, other_ranks: bool = False) -> str:
        """The test true on rank 0 only (`dist.get_rank() == 0`); with `other_ranks`, the one true on
        every other rank (`dist.get_rank() != 0`). `in_module`: as a module of the project spells it
        (see modules_test_launcher_rank), where that differs from the script's."""
        if in_module and self.modules_test_launcher_rank():
            return self.launcher_rank_test(other_ranks)
        return f"{self.rank()} {'!=' if other_ranks else '=='} 0"

    def modules_test_launcher_rank(self) -> bool:
        """Whether a module of the project tests the rank by the launcher's RANK instead of the script's
        test: one true without a process group, so the module stays right for a caller that runs it as
        one process, and in a DataLoader worker started by spawn, where no process group exists. Where
        the launcher sets RANK (torchrun, the deepspeed launcher); Horovod's modules keep its own test
        (horovodrun over MPI sets no HOROVOD_RANK)."""
        return self.runtime is not None and self.runtime.rank_variable == "RANK"

    def launcher_rank_test(self, other_ranks: bool = False) -> str:
        """`os.environ.get("RANK", "0") == "0"` (with `other_ranks`, `!= "0"`): the rank test that reads
        what the launcher set, true where no process group exists yet (import time) or any more."""
        return f'{self.launcher_variable(self.distributed.rank_variable)} {"!=" if other_ranks else "=="} "0"'

    def launcher_variable(self, variable: str, default: str = "0") -> str:
        """`os.environ.get("RANK", "0")`: what the launcher set, readable without a process group."""
        return f'{self.module_name("os")}.environ.get("{variable}", "{default}")'

    def in_other_module(self, node: cst.CSTNode) -> bool:
        """Whether `node` is code of another module of the program (analysis.program), not the script's."""
        if self.program is None or not self.program.modules:
            return False
        if isinstance(node, cst.Module):
            return False
        stmt = node if isinstance(node, cst.BaseStatement) else self.index.statement_holding(node)
        if stmt is None:
            return False
        top = self.index.enclosing_statements(stmt)[-1]
        return self.program.part_of(top) is not self.program.script

    def file_body(self, node: cst.CSTNode) -> Sequence[cst.BaseStatement]:
        """The top-level statements of the file that holds `node`: the script's, or those of a module
        of the program (analysis.program) when the node is there."""
        if self.program is None:
            return self.index.module.body
        stmt = node if isinstance(node, cst.BaseStatement) else self.index.statement_holding(node)
        if stmt is None:
            return self.program.script.module.body
        return self.program.part_of(self.index.enclosing_statements(stmt)[-1]).module.body

    # -- records: typed facts one step leaves for later steps and the artifact makers ----------
    def record(self, value: object) -> None:
        self.records[type(value)] = value

    def recorded(self, kind: type[Record], create: bool = False) -> Record:
        """The record of this type a step left; with `create`, a new empty one when none was."""
        if create and kind not in self.records:
            self.records[kind] = kind()
        value = self.records[kind]
        assert isinstance(value, kind)
        return value

    def sees_setup_names(self, scope: Scope) -> bool:
        """Whether code in `scope` may read the names setup binds (`local_rank`, `device`): in
        setup's own scope, and in functions of a script whose setup runs unguarded at module
        level. Not in a function or class of a script whose setup sits in the `__main__` block:
        imported by other code, it would find no such global."""
        entry = self.sites.entry
        assert entry is not None
        if entry.scope is scope:
            return True
        if self.in_other_module(scope.node):
            return False
        return entry.scope.is_module and (scope.is_module or entry.block is self.index.module)

    def local_rank(self, scope: Scope, after_setup: bool = False) -> str:
        """The runtime's `local_rank` where setup's variable is visible (see sees_setup_names), else
        asked of the runtime where it has a call for it and the code runs after setup (`after_setup`,
        or a function of another module of the program), else read again from the environment
        (Horovod over MPI sets no HOROVOD_LOCAL_RANK: hvd.local_rank() is the one that holds)."""
        name = self.distributed.local_rank_name
        if self.sees_setup_names(scope) and name not in scope.params:
            return name
        if self.distributed.local_rank_call and not scope.is_module and (after_setup or self.in_other_module(scope.node)):
            return self.spell(self.distributed.local_rank_call)
        return f"int({self.launcher_variable(self.distributed.local_rank_variable)})"

    # -- findings ----------------------------------------------------------------------------
    def report(self, code: str, message: str, node: cst.CSTNode | None = None) -> None:
        """A finding at `node`; without one, at the first backward call (never at 0:0)."""
        if node is None and self.sites.backward_calls:
            node = self.sites.backward_calls[0].node
        line, col = self.position(node) if node is not None else (1, 1)
        for torch_words, own_words in self.runtime.advice if self.runtime is not None else ():
            message = message.replace(torch_words, own_words)
        self.findings.append(finding(code, message, line, col))

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        if self._positions is None:
            self._positions = Positions(self.index.module, self.source)
        return self._positions.of(node, self.index.statement_holding(node))

    def code(self, node: cst.CSTNode) -> str:
        if node not in self._code:
            self._code[node] = self.index.module.code_for_node(node)
        return self._code[node]


class Step(Protocol):
    """A rewrite: reads the sites, records edits and findings in the context."""

    def __call__(self, ctx: Context) -> None: ...


@lru_cache(maxsize=256)
def comment_lines(text: str, width: int = 96) -> str:
    """`text` as `# ...` lines of at most `width` characters, each ending in a newline."""
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, width))


def statement(code: str) -> cst.BaseStatement:
    """Parse one statement (cached: nodes are immutable, so a parsed snippet can be reused)."""
    return cst.parse_statement(code)


def statements(code: str) -> list[cst.BaseStatement]:
    """Parse statements; comment lines at the top stay with the first statement."""
    return list(_statements(code))


@lru_cache(maxsize=256)
def _statements(code: str) -> tuple[cst.BaseStatement, ...]:
    module = cst.parse_module(code)
    body = list(module.body)
    if body and module.header:
        header = [line.with_changes(indent=False) if line.comment is None else line for line in module.header]
        body[0] = body[0].with_changes(leading_lines=[*header, *body[0].leading_lines])
    return tuple(body)


@lru_cache(maxsize=256)
def expression(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def with_keyword(call: cst.CSTNode, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """`f(a, b=1)` -> `f(a, b=1, keyword=value)`, spacing `=` the way the call already does; in a
    call with one argument per line, the new one gets its own line (and the trailing comma, if any)."""
    assert isinstance(call, cst.Call)
    args = list(call.args)
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    equal = next((a.equal for a in args if a.keyword is not None), tight)
    new = cst.Arg(value, keyword=cst.Name(keyword), equal=equal)
    between = _line_break_between(call)
    if args and between is not None:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):  # `b,\n)`: the new argument takes over the trailing comma
            args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=between))
            new = new.with_changes(comma=last.comma)
        elif isinstance(last.whitespace_after_arg, cst.ParenthesizedWhitespace):  # `b\n)`
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=between), whitespace_after_arg=cst.SimpleWhitespace(""))
            new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        else:
            between = None
    if between is None and args and isinstance(args[-1].comma, cst.MaybeSentinel):
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    args.append(new)
    return call.with_changes(args=args)


def _line_break_between(call: cst.Call) -> cst.ParenthesizedWhitespace | None:
    """The line break (and indent) that separates the call's arguments, when each has its own line."""
    args = call.args
    for arg in args[:-1]:
        if isinstance(arg.comma, cst.Comma) and isinstance(arg.comma.whitespace_after, cst.ParenthesizedWhitespace):
            return arg.comma.whitespace_after
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace) and len(args) == 1:
        return call.whitespace_before_args
    return None


@dataclass(frozen=True)
class Wrapper:
    """A target's model wrapper: the statements that wrap a model, and how later uses reach the
    user's own module. DDP, DataParallel and DeepSpeed's engine hold it as `.module` and answer
    only `safe` attributes themselves; a wrapper that keeps the user's class (FSDP2's
    `fully_shard`) routes nothing."""

    code: Callable[[Context, ModelSite], str] | None  # `model = DDP(model)\n`; None: a step of the target wraps
    safe: frozenset[str] = WRAPPER_SAFE
    through_module: bool = True
    zero3_partitions: bool = False  # DeepSpeed: at --zero 3 the user's module's own layers gather their weights
