"""`deepspeed.initialize` turns the model and the user's own optimizer into one engine, right
after both exist (and after any weight loading), with the settings of ds_config.json.

The script reads the JSON and then overwrites the keys it has its own values for (micro batch,
accumulation steps, clipping, fp16 on/off), so a `--batch-size 8` on the command line is what
DeepSpeed uses too. The JSON gets the script's defaults as concrete numbers.

After the engine exists, the user's module is reached through `.module` (also where the script
uses what `model.train()` / `model.eval()` return: the engine's return None); in a function that
also runs before the engine is made (a method `__init__` calls before it builds the optimizer, the
engine's place) as `getattr(model, "module", model)`, which is right on both; and a plain
`state_dict()` is gathered on every rank first (ZeRO-3 shards the weights across ranks); a gather
that only some ranks reach (MIG121) leaves the file unchanged at ZeRO-3, where it is a collective.
The optimizer's own `state_dict()` / `load_state_dict()` under ZeRO 1-3 leave it unchanged too
(MIG118): rank 0's state is only its shard, and the ZeRO optimizer cannot load it back.

Where the engine lives (`deepspeed_device`, before setup): `deepspeed.initialize` moves the module
to DeepSpeed's accelerator, `cuda:<local rank>` on a GPU host, never the batches. A model the script
never moves stays on the CPU with its batches, so DeepSpeed is kept there too: the converted script
sets `DS_ACCELERATOR=cpu` (unless the user set it) before DeepSpeed is imported, where DeepSpeed
picks its accelerator, and starts gloo (`KeptOnCpu`; MIG130, a note). A model moved only under an
`if` (or one model moved and another not) is converted as for a GPU, with a warning (MIG131).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from functools import partial

import libcst as cst

from migrate.analysis.index import Scope, read_names, spell
from migrate.analysis.training import callers_of
from migrate.analysis.kinds import Kind, data_loaders, unbatched, value_kind
from migrate.analysis.loaders import bound_where_read, loader_reads
from migrate.analysis.models import aliases, is_after, top_statement
from migrate.analysis.optimizers import OptimizerSide
from migrate.analysis.ordering import ModelOrdering, NoModelOrdering, engine_orderings
from migrate.analysis.placement import device_conditions
from migrate.analysis.sites import LoaderSite, ModelSite
from migrate.analysis.trained import MAX_DEPTH, calls_of
from migrate.analysis.state_dicts import earlier_names, model_state_dicts
from migrate.analysis.syntax import argument, contains
from migrate.analysis.values import dict_entry, literal_value
from migrate.rewrite import small_statement_holding, top_block_imports
from migrate.steps.base import Context, comment_lines, expression, statements
from migrate.steps.engine_refusals import (
    held_optimizer_usable,
    report_kept_on_cpu,
    report_moved_under_condition,
    report_no_engine,
    report_some_moved,
    several_engines_usable,
)
from migrate.steps.epoch_figures import CURRENT_GPU_OR_CPU, reduce_epoch_figures
from migrate.steps.gathers import outside_open_files, report_gather_on_some_ranks
from migrate.steps.wrap_model import remove_data_parallel, unwrap_later_uses
from migrate.steps.deepspeed_names import CONFIG_NAME, DEEPSPEED_ON_CPU
from migrate.target_options import DeepSpeedOptions


@dataclasses.dataclass(frozen=True)
class KeptOnCpu:
    """Every model DeepSpeed gets stays on the CPU, where the script keeps it: so does DeepSpeed."""

    models: tuple[ModelSite, ...]


def deepspeed_device(ctx: Context) -> None:
    """Before setup: a script that never moves the models DeepSpeed gets keeps them and their
    batches on the CPU, so DeepSpeed stays there too: its accelerator is the CPU (chosen when
    `deepspeed` is imported) and its process group gloo (the runtime's setup is DEEPSPEED_ON_CPU)."""
    models = _engine_models(ctx)
    if models and all(device_conditions(ctx.index, site) is None for site in models):
        ctx.record(KeptOnCpu(models))
        ctx.runtime = DEEPSPEED_ON_CPU
        _accelerator_on_cpu(ctx)


def _engine_models(ctx: Context) -> tuple[ModelSite, ...]:
    """The modules the engines get (a container's members: the script's own models); () when no
    engine can be built (deepspeed_engine says why)."""
    ordering = engine_orderings(ctx.sites)
    if isinstance(ordering, NoModelOrdering):
        return ()
    return tuple(site for engine in ordering for site in (engine.members or (engine.model,)))


def _accelerator_on_cpu(ctx: Context) -> None:
    """`os.environ.setdefault("DS_ACCELERATOR", "cpu")` right before the first import of DeepSpeed
    that runs: the script's own module-level one when it is in the top import block (new imports go
    after that block) or the conversion adds none, else the conversion's `import deepspeed`."""
    ctx.module_name("deepspeed")
    code = (comment_lines("the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device "
                          "when imported); move them to a GPU to train there")
            + f'{ctx.module_name("os")}.environ.setdefault("DS_ACCELERATOR", "cpu")\n')
    new = ctx.plan.module_imports
    added = next((i for i, stmt in enumerate(new) if _imports_deepspeed(stmt)), None)
    own = _own_deepspeed_import(ctx)
    if own is not None and (added is None or top_block_imports(ctx.plan.module, [own])):
        ctx.plan.insert_before(own, statements("\n" + code))
    elif added is not None:
        lines = statements("\n" + code)
        simple = [line for line in lines if isinstance(line, cst.SimpleStatementLine)]
        assert len(simple) == len(lines)  # a call statement and the comment lines above it
        new[added:added] = simple


def _own_deepspeed_import(ctx: Context) -> cst.BaseStatement | None:
    """The module-level statement (an import, or the `try:` holding one) that first imports DeepSpeed."""
    for stmt in ctx.index.import_stmts:
        scope = ctx.index.scope_of.get(stmt)
        if _imports_deepspeed(stmt) and scope is not None and scope.is_module:
            return ctx.index.enclosing_statements(stmt)[-1]
    return None


def _imports_deepspeed(stmt: cst.BaseStatement) -> bool:
    """`import deepspeed`, `import deepspeed.comm as c`, `from deepspeed.ops.adam import ...`."""
    for small in getattr(stmt, "body", ()):
        if isinstance(small, cst.Import) and any((spell(a.name) or "").split(".")[0] == "deepspeed" for a in small.names):
            return True
        if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
            if (spell(small.module) or "").split(".")[0] == "deepspeed":
                return True
    return False


def report_placement(ctx: Context) -> None:
    """Last, once the file is converted: MIG130 where DeepSpeed is kept on the CPU; else MIG131 for
    each model the script moves only under an `if`, or does not move while it moves another."""
    if KeptOnCpu in ctx.records:
        for site in ctx.recorded(KeptOnCpu).models:
            report_kept_on_cpu(ctx, site)
        return
    models = _engine_models(ctx)
    moved = [site for site in models if device_conditions(ctx.index, site) is not None]
    for site in models:
        conditions = device_conditions(ctx.index, site)
        if conditions is None and moved:
            report_some_moved(ctx, site, moved[0])
        elif conditions:
            report_moved_under_condition(ctx, site, min(conditions, key=ctx.position))


def epoch_figures(ctx: Context) -> None:
    """The printed epoch sums reduced where the process group takes them: on the current GPU under
    NCCL, on the CPU under gloo (also on a GPU host when DeepSpeed is kept on the CPU)."""
    reduce_epoch_figures(ctx, None if KeptOnCpu in ctx.records else CURRENT_GPU_OR_CPU)


def deepspeed_engine(ctx: Context) -> None:
    engines = _engine_sites(ctx)
    if engines is None:
        ctx.refused = True
        return
    engine = engines[0]
    if not several_engines_usable(ctx, engines) or not held_optimizer_usable(ctx, engine):
        ctx.refused = True
        return
    values = _config_values(ctx, engine)
    values.engines = engines
    if not _usable_config(ctx, values, engine):
        ctx.refused = True
        return
    ctx.record(values)
    config_path = _config_path_code(ctx)
    deepspeed, json = ctx.module_name("deepspeed"), ctx.module_name("json")
    overrides = "".join(f'ds_config[{key}] = {code}\n' for key, code in values.overrides)
    said = ("\n# DeepSpeed reads its settings from ds_config.json; the values this script computes itself\n"
            "# overwrite the file's, so the two never disagree\n") if overrides else "\n# DeepSpeed reads its settings from ds_config.json\n"
    code = (
        f"{said}"
        f"with open({config_path}) as config_file:\n"
        f"    ds_config = {json}.load(config_file)\n"
        f"{overrides}"
    )
    if engine.members:
        code += _container_code(ctx, engine)
    elif len(engines) == 1:
        model, optimizer = engine.model.spelling, engine.optimizer
        if engine.stepped_by:
            holder = optimizer.rpartition(".")[0]
            why = (f"the torch optimizer inside `{holder}` goes to DeepSpeed, and DeepSpeed's optimizer takes its place there: "
                   f"`{holder}.{engine.stepped_by}()` steps it (the engine's step() is not called), `{holder}.zero_grad()` clears it")
            code += comment_lines(why)
        code += f"{model}, {optimizer}, _, _ = {deepspeed}.initialize(model={model}, optimizer={optimizer}, config=ds_config)\n"
    else:
        copy = ctx.module_name("copy")
        code += "# one engine per model and its own optimizer, each with its own copy of the settings\n"
        for each in engines:
            model, optimizer = each.model.spelling, each.optimizer
            code += (f"{model}, {optimizer}, _, _ = {deepspeed}.initialize(model={model}, optimizer={optimizer}, "
                     f"config={copy}.deepcopy(ds_config))\n")
    ctx.plan.insert_after(engine.anchor, statements(code))
    assert ctx.wrapper is not None  # the engine: what it answers itself is the target's
    for each in engines:
        for member in each.members:  # modules the script keeps calling itself: no `.module`
            remove_data_parallel(ctx, member)
            _gather_state_dicts(ctx, member, through_engine=False)
        if not each.members:
            remove_data_parallel(ctx, each.model)
            edited = {node: len(edits) for node, edits in ctx.plan.replacements.items()}
            unwrap_later_uses(ctx, each.model, safe=ctx.wrapper.safe)
            _module_where_returned(ctx, each.model)
            _module_when_there(ctx, each.model, edited)
            _gather_state_dicts(ctx, each.model, through_engine=True)
        if each.caller is not None:  # the caller's plain module, trained in place by the engine
            _gather_state_dicts(ctx, each.caller, through_engine=False)
        for plain in earlier_names(ctx.index, each.model):  # `net = ssd_net`: ssd_net still names the plain module
            _gather_state_dicts(ctx, plain, through_engine=False)
        _refuse_optimizer_state(ctx, each)


# the engine answers these itself, but returns None where the module returns itself
NONE_RETURNING = frozenset({"train", "eval"})


def _module_where_returned(ctx: Context, site: ModelSite) -> None:
    """`model.eval().cpu()`, `net = model.train()`, `run(model.eval())`: the engine's train() and
    eval() switch its module and return None, so where the script uses what they return (the
    module, in the original), they are called on `model.module`."""
    names = aliases(ctx.index, site)
    for use in ctx.index.attributes:
        if (use.node.attr.value not in NONE_RETURNING or not use.called or (use.owner, use.place.scope.name) not in names
                or not is_after(ctx.index, use.place.stmt, site)):
            continue
        _, small = small_statement_holding(use.place.stmt, use.node)
        standalone = (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and small.value.func is use.node)
        if small is not None and not standalone:
            ctx.plan.replace(use.node, _on_module)


def _on_module(updated: cst.CSTNode) -> cst.CSTNode:
    """`model.eval` -> `model.module.eval`."""
    assert isinstance(updated, cst.Attribute)
    return updated.with_changes(value=cst.Attribute(value=updated.value, attr=cst.Name("module")))


def runs_before_engine(ctx: Context, stmt: cst.BaseStatement, site: ModelSite) -> bool:
    """Whether `stmt`, in a function of the file, also runs before the engine exists: that function
    is called above `deepspeed.initialize` in the code that makes the engine
    (`self.update_target_net()` in `__init__` before the optimizer is built), directly or through
    other functions of the file. There the model's name still holds the user's module, which has
    no `.module` (DDP wraps where the model is built, before such calls)."""
    index = ctx.index
    scope = index.scope_of.get(stmt)
    if scope is None or scope is site.scope or scope.is_module:
        return False
    frontier, seen = [scope], {id(scope.node)}
    for _ in range(MAX_DEPTH):
        callers: list[Scope] = []
        for function in frontier:
            for call in calls_of(index, function):
                caller = call.place.scope
                if caller is site.scope:
                    if not is_after(index, call.place.stmt, site):
                        return True
                elif not caller.is_module and id(caller.node) not in seen:
                    seen.add(id(caller.node))
                    callers.append(caller)
        frontier = callers
    return False


def _module_or_itself(code: str) -> str:
    """The user's module whether or not the engine exists yet: `getattr(model, "module", model)`."""
    return f'getattr({code}, "module", {code})'


def _owner_replaced(updated: cst.CSTNode, owner: str) -> cst.CSTNode:
    assert isinstance(updated, cst.Attribute)
    return updated.with_changes(value=expression(owner))


def _module_when_there(ctx: Context, site: ModelSite, edited: dict[cst.CSTNode, int]) -> None:
    """A use of the model routed through `.module` (unwrap_later_uses, _module_where_returned) in a
    function that also runs before the engine exists (`self.online_net.load_state_dict(...)` in a
    method `__init__` calls before the optimizer is built) reaches the module as `getattr(model,
    "module", model)`: the plain module there, the engine's module after. `edited` holds how many
    edits each node had before those steps: only theirs are replaced."""
    names = aliases(ctx.index, site)
    replaced = ctx.plan.replacements
    for use in ctx.index.attributes:
        added = len(replaced.get(use.node, ())) - edited.get(use.node, 0)
        if added <= 0 or (use.owner, use.place.scope.name) not in names:
            continue
        if not runs_before_engine(ctx, use.place.stmt, site):
            continue
        del replaced[use.node][-added:]
        ctx.plan.replace(use.node, partial(_owner_replaced, owner=_module_or_itself(ctx.code(use.node.value))))


def _container_code(ctx: Context, engine: ModelOrdering) -> str:
    """One engine over a ModuleDict of the modules one optimizer trains together. The script
    keeps calling each module itself: they are the container's own submodules, so the engine's
    backward and step (and ZeRO's hooks on every submodule) cover them."""
    torch, deepspeed = ctx.module_name("torch"), ctx.module_name("deepspeed")
    container, optimizer = engine.model.spelling, engine.optimizer
    names = [member.spelling for member in engine.members]
    listed = ", ".join(f"`{n}`" for n in names[:-1]) + f" and `{names[-1]}`"
    entries = ", ".join(f'"{n}": {n}' for n in names)
    why = f"one engine over {listed}, which `{optimizer}` trains together; the script still calls each module itself"
    return (
        comment_lines(why)
        + f"{container} = {torch}.nn.ModuleDict({{{entries}}})\n"
        f"{container}, {optimizer}, _, _ = {deepspeed}.initialize(model={container}, optimizer={optimizer}, config=ds_config)\n"
    )


def _engine_sites(ctx: Context) -> tuple[ModelOrdering, ...] | None:
    """Where the engines are created (one per trained model); None (with the finding that says
    why) when nowhere."""
    ordering = engine_orderings(ctx.sites)
    compiled_first = ordering.compiled_first if isinstance(ordering, NoModelOrdering) else ordering[0].compiled_first
    if compiled_first is not None:
        ctx.report("MIG115", "torch.compile runs before deepspeed.initialize; call engine.compile() instead", compiled_first)
    if isinstance(ordering, NoModelOrdering):
        report_no_engine(ctx, ordering)
        return None
    return ordering


def _config_path_code(ctx: Context) -> str:
    os_name = ctx.module_name("os")
    name = DeepSpeedOptions.of(ctx.options).config_out or CONFIG_NAME
    if os.path.isabs(name):
        return python_string(name)
    return f"{os_name}.path.join({os_name}.path.dirname({os_name}.path.abspath(__file__)), {python_string(name)})"


def python_string(text: str) -> str:
    """A double-quoted Python literal of `text`. Every JSON escape means the same in Python, and
    with ensure_ascii=False a character outside the BMP stays itself (ASCII-only JSON spells it as
    two surrogate escapes, which Python reads as two other characters: another file name)."""
    return json.dumps(text, ensure_ascii=False)


# -- the numbers ---------------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)
class EngineConfig:
    """What the DeepSpeed step decided: the engine's place, the concrete numbers ds_config.json
    gets, and the script's own expressions that overwrite them (read by engine_calls and by the
    config maker in migrate.targets.deepspeed)."""

    engine: ModelOrdering  # the first engine's (the only one, unless several models train)
    engines: tuple[ModelOrdering, ...] = ()  # every engine: one per model with an optimizer of its own

    @property
    def trained_sites(self) -> list[ModelSite]:
        """The modules the engines train: each engine's model, or a container engine's members."""
        sites = [site for each in self.engines or (self.engine,) for site in (each.members or (each.model,))]
        return sites + [each.caller for each in self.engines or (self.engine,) if each.caller is not None]
    micro_batch: object = 1
    accumulation: object = 1
    clipping: object = 0.0
    fp16: bool = False  # fp16/bf16: the script's mixed precision, run by the config's torch_autocast
    bf16: bool = False
    accumulates: bool = False
    overrides: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (JSON key code, script's code)

    @property
    def precision(self) -> str:
        """The precision as `_precision` and `autocast_precision` spell it: fp16, bf16 or fp32."""
        return "fp16" if self.fp16 else "bf16" if self.bf16 else "fp32"


def _config_values(ctx: Context, engine: ModelOrdering) -> EngineConfig:
    """JSON values (concrete numbers) and the script's own expressions that override them."""
    values = EngineConfig(engine)
    overrides = values.overrides

    batch, candidates, loader_problems = _micro_batch(ctx, engine)
    _choose(ctx, values, "micro_batch", batch, candidates, 1, loader_problems)

    factor = _accumulation_read(ctx, engine)
    _choose(ctx, values, "accumulation", factor, [factor], 1)
    values.accumulates = factor is not None

    clip = engine.side.clip_calls[0] if engine.side.clip_calls else None
    max_norm = argument(clip.node, "max_norm", 1) if clip is not None else None
    norm = (max_norm.value, clip.place.scope) if max_norm is not None and clip is not None else None
    _choose(ctx, values, "clipping", norm, [norm], 1.0 if max_norm else 0.0)
    if isinstance(values.clipping, int) and not isinstance(values.clipping, bool):
        values.clipping = float(values.clipping)

    precision, enabled = _precision(ctx, engine.side)
    values.fp16 = precision == "fp16"
    values.bf16 = precision == "bf16"
    if precision in ("fp16", "bf16") and enabled is not None and _visible(ctx, enabled, engine):
        overrides.append((AUTOCAST_SWITCH, ctx.code(enabled)))
    return values


CONFIG_SOURCES = {
    "micro_batch": ("train_micro_batch_size_per_gpu", "the training DataLoader's batch_size"),
    "accumulation": ("gradient_accumulation_steps", "the accumulation factor in the `if ... % n` test"),
}

JSON_KEYS = {key: json_key for key, (json_key, _source) in CONFIG_SOURCES.items()} | {"clipping": "gradient_clipping"}

Read = tuple[cst.BaseExpression, Scope]  # an expression of the script, and the scope it is read in


def _choose(ctx: Context, values: EngineConfig, key: str, source: Read | None, candidates: list[Read | str | None],
            default: object, loader_problems: list[str] | None = None) -> None:
    """The JSON gets the number the script always gives `source` (followed by analysis.values
    through names, parameters, dict entries and argparse defaults), else `default`; the script
    overwrites it with the first candidate that holds a number and can be spelled where the
    engine is created (its own expression, or a DataLoader's `.batch_size` given as code). When
    none can, MIG116 says what was seen."""
    literal = _json_number(ctx, source)
    setattr(values, key, literal if literal is not None else default)
    if source is not None and isinstance(source[0], (cst.Integer, cst.Float)):
        return  # a number written in the script: the JSON says the same
    json_key = JSON_KEYS[key]
    problems: list[str] = []
    for candidate in candidates:
        code = candidate if isinstance(candidate, str) else _override_code(ctx, candidate, values.engine, problems)
        if code is not None:
            values.overrides.append((f'"{json_key}"', code))
            return
    problems += loader_problems or []
    if problems:
        ctx.report("MIG116", "; ".join(problems) + f': ds_config.json fixes "{json_key}" at {getattr(values, key)}; '
                   "keep the two equal", values.engine.anchor)


def _json_number(ctx: Context, source: Read | None) -> object:
    """The number the script always gives `source` (None when not one); a literal too long to read
    is described instead, for _usable_config to refuse."""
    if source is None:
        return None
    expr, scope = source
    literal = literal_value(ctx.index, expr, scope)
    if literal is None and isinstance(expr, cst.Integer):
        return f"a {len(expr.value)}-digit number"
    return literal


def _override_code(ctx: Context, candidate: Read | None, engine: ModelOrdering, problems: list[str]) -> str | None:
    """The script's code for a candidate that holds a number and is defined where the engine is
    created; None (with the reason added to `problems`) for any other."""
    if candidate is None:
        return None
    expr, _scope = candidate
    problem = _not_a_number(ctx, candidate)
    if problem is None and not _visible(ctx, expr, engine):
        problem = f"`{ctx.code(expr)}` is not known where the engine is created"
    if problem is not None:
        problems.append(problem)
        return None
    return ctx.code(expr)


def _not_a_number(ctx: Context, candidate: Read) -> str | None:
    """Why an expression cannot hold a batch size, a factor or a norm: its value is known to be a
    tensor, a dataset, a module, a DataLoader or None, or it reads an attribute of one of those
    or of a number (`BATCH.batch_size`). None when it may hold a number."""
    expr, scope = candidate
    kind = value_kind(ctx.index, expr, scope)
    if kind is not None and kind is not Kind.NUMBER:
        return f"`{ctx.code(expr)}` is {kind.value}, not a number"
    if not isinstance(expr, cst.Attribute):
        return None
    owner = value_kind(ctx.index, expr.value, scope)
    if owner is not None and owner is not Kind.DATA_LOADER:
        return f"`{ctx.code(expr)}` reads `{expr.attr.value}` of {owner.value}"
    return None


def _micro_batch(ctx: Context, engine: ModelOrdering) -> tuple[Read | None, list[Read | str | None], list[str]]:
    """The training DataLoader's batch size, the candidates that override it (its expression
    when written in the call, and the DataLoaders' `.batch_size` where the engine is created), and
    why the training loader names seen there are not such DataLoaders."""
    loader = _backward_loader(ctx)
    batch, written = _loader_batch(ctx, loader) if loader else (_made_loader_batch(ctx), True)
    names, problems = _visible_loaders(ctx, engine, loader)
    if not names and loader and batch is not None and isinstance(batch[0], cst.Name) and batch[0].value in batch[1].params:
        batch = _made_loader_batch(ctx) or _as_the_caller_hands_it(ctx, batch)  # built by a helper: its caller's value
    spelled: list[Read | str | None] = [f"{n}.batch_size" for n in names]
    return batch, [batch, *spelled] if written else [*spelled, batch], problems


def _backward_loader(ctx: Context) -> LoaderSite | None:
    """The training DataLoader whose batches reach the backward: the first one a step loop iterates
    (in the call itself, or by a name followed up through the callers that hand it down), matched in
    the scope the name is bound in, so that an `evaluate()`'s own `loader = DataLoader(test_set, ...)`
    is not the training `loader` of another function. When none matches so (batches drawn with
    `next()`, a loader kept on `self`), the first training loader analysis.loaders found."""
    loaders = ctx.sites.loaders
    if not loaders:
        return None
    reads = loader_reads(ctx.index, ctx.sites.step_loops)
    steps = {id(loop.node) for loop in ctx.sites.step_loops}
    fed = (site for site in loaders if id(site.call.place.stmt) in steps or bound_where_read(ctx.index, site.call, reads))
    return next(fed, loaders[0])


def _made_loader_batch(ctx: Context) -> Read | None:
    """Where no DataLoader of the program feeds the backward: the `batch_size=` handed to the call
    that makes the loader a step loop iterates (`train_loader = create_dataloader_v1(text,
    batch_size=settings["batch_size"], ...)`, a helper of another module)."""
    for loop in ctx.sites.step_loops:
        iterated = loop.node.iter if isinstance(loop.node, cst.For) else None
        if isinstance(iterated, cst.Name):
            found = _batch_of_made(ctx, iterated.value, loop.place.scope)
            if found is not None:
                return found
    return None


def _batch_of_made(ctx: Context, name: str, scope: Scope, depth: int = 0) -> Read | None:
    """The `batch_size=` of the call bound to `name` in `scope`, or, for a parameter, in the one
    caller that hands it (`train(model, train_loader)`), a few calls up."""
    for binding in ctx.index.bindings_of_in(name, scope):
        if isinstance(binding.value, cst.Call):
            batch = next((a for a in binding.value.args if a.keyword is not None and a.keyword.value == "batch_size"), None)
            if batch is not None:
                return batch.value, binding.place.scope
    callers = callers_of(ctx.index, scope) if name in scope.params and depth < 3 else []
    if len(callers) != 1:
        return None
    position = scope.params.index(name)
    handed = [a for a in callers[0].node.args if a.keyword is None]
    given = next((a.value for a in callers[0].node.args if a.keyword is not None and a.keyword.value == name), None)
    given = given if given is not None else handed[position].value if position < len(handed) else None
    if not isinstance(given, cst.Name):
        return None
    return _batch_of_made(ctx, given.value, callers[0].place.scope, depth + 1)


def _as_the_caller_hands_it(ctx: Context, read: Read | None, depth: int = 0) -> Read | None:
    """A batch size that is a parameter of the function building the loader (`DataLoader(dataset,
    batch_size=batch_size)` in `create_dataloader_v1(txt, batch_size=4)`), read where the one caller
    of that function hands it (`batch_size=settings["batch_size"]`), a few calls up; else as it is."""
    if read is None or not isinstance(read[0], cst.Name) or read[0].value not in read[1].params or depth >= 3:
        return read
    name, scope = read[0].value, read[1]
    callers = callers_of(ctx.index, scope)
    if len(callers) != 1:
        return read
    position = scope.params.index(name)
    handed = [a for a in callers[0].node.args if a.keyword is None and not a.star]
    given = next((a.value for a in callers[0].node.args if a.keyword is not None and a.keyword.value == name), None)
    given = given if given is not None else handed[position].value if position < len(handed) else None
    if given is None:
        return read
    return _as_the_caller_hands_it(ctx, (given, callers[0].place.scope), depth + 1)


def _loader_batch(ctx: Context, loader: LoaderSite) -> tuple[Read | None, bool]:
    """The training DataLoader's batch size as the script writes it, and whether it is written in
    the call itself (else it is the entry of a dict literal passed as `**kwargs`). None when not
    given (DataLoader's default, 1) or `batch_size=None` (the loader makes no batches)."""
    call = loader.call
    batch = argument(call.node, "batch_size", 1)
    if batch is not None:
        none = isinstance(batch.value, cst.Name) and batch.value.value == "None"
        return (None if none else (batch.value, call.place.scope)), True
    for arg in call.node.args:
        if arg.star == "**":
            entries = dict_entry(ctx.index, arg.value, "batch_size", call.place.scope) or []
            if len(entries) == 1:
                return entries[0], False
    return None, True


def _accumulation_read(ctx: Context, engine: ModelOrdering) -> Read | None:
    """The accumulation factor (`_accumulation_factor`) with the scope it is read in (that of the
    backward it counts, or the caller's that passes it down)."""
    factor = _accumulation_factor(ctx, engine)
    for accumulation in ctx.sites.accumulations:
        if accumulation.factor is factor:
            return factor, accumulation.factor_scope or ctx.index.scope_of[accumulation.last]
    return None


def _usable_config(ctx: Context, values: EngineConfig, engine: ModelOrdering) -> bool:
    """A number the script trains with that no DeepSpeed config can hold (a batch of -1, an
    infinite or negative clipping norm) is refused, never written into ds_config.json."""
    problems = []
    for key, (json_key, source) in CONFIG_SOURCES.items():
        value = getattr(values, key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**9:
            shown = value if isinstance(value, str) else repr(value)
            problems.append(f"{json_key} would be {shown} ({source}), and DeepSpeed needs a whole number from 1 up")
    clipping = values.clipping
    if isinstance(clipping, bool) or not isinstance(clipping, (int, float)) or not math.isfinite(clipping) or clipping < 0:
        problems.append(f"gradient_clipping would be {clipping!r} (the max_norm given to clip_grad_norm_), and "
                        "DeepSpeed needs a finite number, 0 or more (0 turns clipping off)")
    if problems:
        ctx.report("MIG125", "; ".join(problems) + "; left unchanged: fix the value, then convert again", engine.anchor)
    return not problems


def _accumulation_factor(ctx: Context, engine: ModelOrdering) -> cst.BaseExpression | None:
    """`n` of the engine's model's `if ... % n ...: optimizer.step()` (analysis.accumulation)."""
    for accumulation in ctx.sites.accumulations:
        if accumulation.model == engine.model.spelling:
            return accumulation.factor
    return None


# The script's switch overwrites torch_autocast.enabled (not fp16/bf16.enabled: see engine_calls)
AUTOCAST_SWITCH = '"torch_autocast"]["enabled"'


def _precision(ctx: Context, side: OptimizerSide) -> tuple[str, cst.BaseExpression | None]:
    """The precision to ask DeepSpeed for ("fp16", "bf16", "fp32"), and the script's own on/off
    switch for it: the GradScaler's `enabled=`, else that of an autocast block of that precision."""
    chosen = DeepSpeedOptions.of(ctx.options).precision
    precision = chosen if chosen != "auto" else _script_precision(side)
    calls = [b.value for b in side.scaler_bindings]
    calls += [block.items[0].item for block in side.autocast_blocks if autocast_precision(block) == precision]
    switches = [argument(call, "enabled", 99) for call in calls if isinstance(call, cst.Call)]
    return precision, next((switch.value for switch in switches if switch is not None), None)


def _script_precision(side: OptimizerSide) -> str:
    """A GradScaler means fp16; a bfloat16 autocast without one bf16; anything else fp32."""
    if side.scaler_bindings:
        return "fp16"
    if any(autocast_precision(block) == "bf16" for block in side.autocast_blocks):
        return "bf16"
    return "fp32"


def autocast_precision(block: cst.With) -> str:
    """The precision an autocast block computes in: bf16 when it names torch.bfloat16, else fp16."""
    bfloat16 = contains(block.items[0].item, lambda n: isinstance(n, cst.Attribute) and n.attr.value == "bfloat16")
    return "bf16" if bfloat16 else "fp16"


def _visible_loaders(ctx: Context, engine: ModelOrdering, loader: LoaderSite | None) -> tuple[list[str], list[str]]:
    """Training loader spellings defined where the engine is created whose `.batch_size` is the
    batch size (a DataLoader that batches: analysis.kinds, and may be `loader`, the one that feeds
    the backward), and why each other one seen there is not."""
    names = set(ctx.sites.training_loader_names) | {site.spelling for site in ctx.sites.loaders if site.spelling}
    visible = sorted(n for n in names if _visible(ctx, expression(n), engine))
    problems = {n: _loader_problem(ctx, n, engine, loader) for n in visible}
    return [n for n in visible if problems[n] is None], [p for p in problems.values() if p is not None]


def _loader_problem(ctx: Context, name: str, engine: ModelOrdering, loader: LoaderSite | None) -> str | None:
    """Why `name.batch_size`, read where the engine is created, is not the batch size: the name
    is not known to be a DataLoader (a tensor, a dataset, another module's loader, a torchtext
    iterator), is one whose `.batch_size` is None, or only another DataLoader than `loader` (an
    evaluation one). None when it is the batch size."""
    spelled = expression(name)
    loaders = data_loaders(ctx.index, spelled, engine.model.scope)
    if loaders is None:
        kind = value_kind(ctx.index, spelled, engine.model.scope)
        return f"`{name}` is {kind.value}, not a DataLoader" if kind else f"`{name}` is not known to be a DataLoader"
    if loader is not None and loaders and not any(call is loader.call.node for call in loaders):
        line, _ = ctx.position(loaders[0])
        return f"`{name}` is the DataLoader of line {line}, not the one the training loop iterates"
    reasons = [reason for reason in map(unbatched, loaders) if reason is not None]
    return f"`{name}` is a DataLoader with {reasons[0]}" if reasons else None


def _visible(ctx: Context, expression: cst.BaseExpression, engine: ModelOrdering) -> bool:
    """Whether every name the expression reads is defined where the engine is created."""
    scope = engine.model.scope
    # the anchor's block (the anchor included), then each block around it (up to the statement holding it)
    chain = ctx.index.enclosing_statements(engine.anchor)
    levels = [(*ctx.index.block_of[stmt], stmt is engine.anchor) for stmt in chain]
    for name in read_names(expression):
        if name in scope.params or name in ctx.index.imports or name in ctx.index.functions:
            continue
        bound_before = any(
            b.target == name
            and b.place.scope.node is scope.node  # not a local of a function defined above
            and any((top := top_statement(ctx.index, b.place.stmt, block)) is not None
                    and (block.body.index(top) <= position if own else block.body.index(top) < position)
                    for block, position, own in levels)
            for b in ctx.index.bindings
        )
        module_level = any(b.target == name and b.place.scope.is_module for b in ctx.index.bindings) and not scope.is_module
        if not (bound_before or module_level):
            return False
    return True


# -- state dicts ---------------------------------------------------------------------------------

def _gather_state_dicts(ctx: Context, site: ModelSite, through_engine: bool) -> None:
    """`torch.save(model.state_dict(), p)` -> gather on every rank, then save the full copy
    (`model.module` for the engine itself, the module as it is for a container's member)."""
    deepspeed = ctx.module_name("deepspeed")
    for read in model_state_dicts(ctx.index, site):
        variable = f"{read.owner.split('.')[-1]}_state"
        early = through_engine and runs_before_engine(ctx, read.stmt, site)
        module = _module_or_itself(read.owner) if early else f"{read.owner}.module" if through_engine else read.owner
        why = comment_lines("this also runs before deepspeed.initialize, where the name still holds the module itself")
        gather = statements(
            (why if early else "")
            + f"with {deepspeed}.zero.GatheredParameters(list({module}.parameters())):"
            "  # ZeRO-3 shards the weights: every rank gathers\n"
            f"    {variable} = {{name: tensor.detach().cpu().clone() for name, tensor in {module}.state_dict().items()}}\n"
        )
        anchor = outside_open_files(ctx, read.stmt)
        # the gather is a collective only at ZeRO-3 (below it GatheredParameters does nothing)
        zero3 = DeepSpeedOptions.of(ctx.options).zero == 3
        if report_gather_on_some_ranks(ctx, anchor, site, "ZeRO-3", refuse=zero3) and zero3:
            ctx.refused = True  # the ranks that skip the gather would leave the others waiting
        ctx.plan.insert_before(anchor, gather[:-1])
        ctx.plan.insert_above(anchor, gather[-1])
        ctx.plan.replace_with(read.call, cst.Name(variable))


def _refuse_optimizer_state(ctx: Context, engine: ModelOrdering) -> None:
    """DeepSpeed's optimizer state is sharded per rank from ZeRO-1 on: rank 0's
    `optimizer.state_dict()` holds only its own shard (the others' are lost), and the ZeRO
    optimizer's `load_state_dict` takes one such state per rank, so it fails on a saved dict. The
    file is left unchanged (MIG118): the engine's own checkpoints are the way."""
    zero = DeepSpeedOptions.of(ctx.options).zero
    if zero == 0:
        return  # stage 0 keeps the torch optimizer itself
    for use in ctx.index.attributes:
        if use.owner == engine.optimizer and use.node.attr.value in ("state_dict", "load_state_dict") and use.called:
            ctx.report("MIG118", f"`{engine.optimizer}.{use.node.attr.value}()` is this rank's shard of the optimizer state "
                       f"under ZeRO stage {zero}: a checkpoint saved on rank 0 loses the other ranks' shards, "
                       "and the ZeRO optimizer's load_state_dict fails on it; save and resume with "
                       "engine.save_checkpoint(dir, client_state={...}) / engine.load_checkpoint(dir) on every rank "
                       "(or convert with --zero 0); the file is left unchanged", use.node)
            ctx.refused = True
