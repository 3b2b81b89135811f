"""nn.DataParallel, for a quick check on one machine: one process drives every visible GPU,
splitting each batch across them. No process group, no sampler, no launcher, no rank-0 guards:
the script runs as `python train.py` as before. The model is wrapped once it is placed (on the
first GPU, where DataParallel wants it) and its weights are loaded; later uses reach the user's
module through `.module`, so checkpoints keep plain keys. Without CUDA, DataParallel calls the
module directly, so on a CPU the converted script trains exactly as the original.

It is slower than DDP (one Python process, the model copied to every GPU at every step) and stops
at one machine: a note says so and names `migrate to-ddp`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrate.records import Severity
from migrate.targets.base import Conversion, Target

if TYPE_CHECKING:
    import libcst as cst

    from migrate.analysis.index import Binding
    from migrate.analysis.sites import ModelSite
    from migrate.steps.base import Context

# DataParallel answers these itself (the DDP-only ones, such as no_sync, left out)
DATA_PARALLEL_ANSWERS = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
    "named_modules", "train", "eval", "zero_grad", "to", "cuda", "cpu", "forward", "requires_grad_", "apply",
    "module", "training", "half", "float", "double", "bfloat16", "type", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook",
})


def data_parallel_wrap(ctx: Context, site: ModelSite) -> str:
    """`model = nn.DataParallel(model)`, under the script's own name for torch.nn when it has one."""
    names = ctx.import_names
    nn = names.reusable("torch.nn")
    wrapper = names.reusable("torch.nn.DataParallel", private=True)
    spelled = f"{nn}.DataParallel" if nn else wrapper or f"{ctx.torch}.nn.DataParallel"
    return f"{site.spelling} = {spelled}({site.spelling})  # splits each batch across the GPUs\n"


def quick_check_note(ctx: Context) -> None:
    """MIG006 at the first wrap: what DataParallel is for, and the command for real training."""
    site = ctx.sites.models[0]
    ctx.report("MIG006", "nn.DataParallel is for a quick check on one machine: one process drives every GPU and "
               "splits every tensor argument of forward along its first dimension (batch-first inputs only), so it "
               "is slower than DistributedDataParallel and cannot use a second machine; for training, convert the "
               f"original with `migrate to-ddp {ctx.script}`",
               site.wrap_after or site.wrap_before)


def model_on_first_gpu(ctx: Context) -> None:
    """DataParallel wants the model on cuda:0 whenever the machine has GPUs: with one GPU it moves
    the model there itself (the inputs stay where the script put them), with several its first
    forward fails. A model this file never moves to a GPU is left alone (MIG201, refused); one
    placed on a device that may be the CPU or another GPU is converted with MIG201."""
    for site in ctx.sites.models:
        placements = _placements(ctx, site)
        if not placements:
            ctx.report("MIG201", f"`{site.spelling}` is never moved to a GPU in this file (no `.cuda()` or `.to(...)` "
                       "on it): nn.DataParallel would move it to the first GPU of a machine that has one while its "
                       "inputs stay on the CPU, or fail at the first forward with several; the file is left "
                       "unchanged: place the model and its inputs on the GPU first, or convert with `migrate to-ddp`",
                       site.wrap_after or site.wrap_before)
            ctx.refused = True
            return
        seen = [(call, _device_said(ctx, call)) for call in placements]
        if any(said is None for _call, said in seen):
            continue  # placed on the first GPU whenever there is one
        call, said = seen[0]
        ctx.report("MIG201", f"`{ctx.code(call)}` places the model on {said}: nn.DataParallel wants it on cuda:0 on a "
                   "machine with GPUs (with one GPU it moves the model there itself, with several the first forward "
                   "fails); run with the first GPU, or convert the original with `migrate to-ddp`", call)


def _placements(ctx: Context, site: ModelSite) -> list[cst.Call]:
    """`.cuda(...)` and `.to(...)` calls on the model before the wrap: on any name it is reached by,
    or in the expression that builds it (`Net().to(device)`, `model.float().cuda()`)."""
    import libcst as cst

    from migrate.analysis.index import spell
    from migrate.analysis.models import aliases, is_after

    names = {spelling for spelling, _scope in aliases(ctx.index, site)}
    builders = {id(b.value) for b in ctx.index.bindings if b.target == site.spelling and b.value is not None}
    found: list[cst.Call] = []
    for call in ctx.index.calls:
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "to")):
            continue
        receiver = func.value
        while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
            receiver = receiver.func.value
        built_here = any(id(node) in builders for node in _enclosing_values(ctx, call.node))
        if (spell(receiver) in names or built_here) and not is_after(ctx.index, call.place.stmt, site):
            found.append(call.node)  # `torch.save(model.to("cpu"))` after training is no placement
    return found


def _enclosing_values(ctx: Context, call: cst.Call) -> list[cst.CSTNode]:
    """The binding values of the statement that holds `call`, when the call is inside one of them."""
    stmt = ctx.index.statement_holding(call)
    return [b.value for b in ctx.index.bindings_at(stmt) if b.value is not None] if stmt is not None else []


def _device_said(ctx: Context, call: cst.Call) -> str | None:
    """None when the call puts the model on the first GPU whenever CUDA is available; otherwise
    what it puts it on, in words for the finding."""
    import libcst as cst

    func = call.func
    assert isinstance(func, cst.Attribute)
    args = [a.value for a in call.args if a.keyword is None or a.keyword.value == "device"]
    if func.attr.value == "cuda":
        if not args or (isinstance(args[0], cst.Integer) and args[0].value == "0"):
            return None
        return f"GPU `{ctx.code(args[0])}`, which may not be the first"
    device = next((a for a in args if not _is_dtype(ctx, a)), None)
    if device is None:
        return "the device it already has (`.to()` without a device)"
    return _where(ctx, device, call)


def _where(ctx: Context, device: cst.BaseExpression, call: cst.Call) -> str | None:
    """`_first_gpu_or_why` over every value `device` can come from (names, argparse defaults...)."""
    from migrate.analysis.values import origins

    holder = ctx.index.statement_holding(call)
    scope = ctx.index.scope_of.get(holder) if holder is not None else None
    for origin in origins(ctx.index, device, scope):
        if origin.unknown:
            return f"`{ctx.code(device)}`, a device this tool cannot tell"
        said = _first_gpu_or_why(ctx, origin.node)
        if said is not None:
            return said if origin.node is device else f"`{ctx.code(device)}` ({said})"
    return None


def _first_gpu_or_why(ctx: Context, value: cst.BaseExpression) -> str | None:
    """None when `value` is the first GPU whenever CUDA is available; else what it is, in words."""
    import libcst as cst

    if isinstance(value, cst.IfExp):
        if _tests_cuda_available(ctx, value.test):
            return _first_gpu_or_why(ctx, value.body)
        return f"the CPU unless `{ctx.code(value.test)}` holds"
    if isinstance(value, cst.Call) and ctx.index.qualify(value.func) == "torch.device":
        args = [a.value for a in value.args if a.keyword is None]
        if len(args) == 2:
            first = isinstance(args[1], cst.Integer) and args[1].value == "0"
            return None if first else f"GPU `{ctx.code(args[1])}`, which may not be the first"
        return _first_gpu_or_why(ctx, args[0]) if len(args) == 1 else f"`{ctx.code(value)}`"
    if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
        text = value.evaluated_value
        if text in ("cuda", "cuda:0"):
            return None
        return "the CPU" if text == "cpu" else f"`{text}`"
    if isinstance(value, cst.Integer):
        return None if value.value == "0" else f"GPU {value.value}"
    return f"`{ctx.code(value)}`, a device this tool cannot tell"


def _tests_cuda_available(ctx: Context, test: cst.BaseExpression) -> bool:
    """`torch.cuda.is_available()`, or a name bound only to it (`use_gpu = torch.cuda.is_available()`)."""
    import libcst as cst

    if isinstance(test, cst.Call):
        return ctx.index.qualify(test.func) == "torch.cuda.is_available"
    if isinstance(test, cst.Name):
        bindings = ctx.index.bindings_of(test.value)
        return bool(bindings) and all(b.value is not None and _tests_cuda_available(ctx, b.value) for b in bindings)
    return False


TORCH_DTYPES = frozenset(f"torch.{name}" for name in (
    "float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8", "int16", "int32", "int64", "long"))


def _is_dtype(ctx: Context, value: cst.BaseExpression) -> bool:
    """`model.to(torch.bfloat16)`: a dtype, not a device."""
    return ctx.index.qualify(value) in TORCH_DTYPES


def gathered_losses(ctx: Context) -> None:
    """A forward that returns the loss gives one loss per GPU under DataParallel, gathered into a
    vector: `loss.backward()` then fails. `loss = loss.mean()` goes after each statement that takes
    a loss from the model's output (a no-op on one device)."""
    from migrate.analysis.models import aliases
    from migrate.steps.base import statement

    losses = _loss_names(ctx)
    done: set[int] = set()
    for site in ctx.sites.models:
        names = aliases(ctx.index, site)
        for binding in ctx.index.bindings:
            if binding.target not in losses or id(binding.node) in done:
                continue
            if not _from_model_output(ctx, binding, names):
                continue
            done.add(id(binding.node))
            ctx.plan.insert_after(binding.place.stmt, [statement(f"{binding.target} = {binding.target}.mean()  # one loss per GPU, "
                                                   "gathered by DataParallel\n")])


def _loss_names(ctx: Context) -> set[str]:
    """Names the script treats as a loss: what backward runs on, and names with `loss` in them."""
    from migrate.analysis.index import spell

    names = {b.target for b in ctx.index.bindings if "loss" in b.target.lower()}
    for call in ctx.sites.backward_calls:
        func = call.node.func
        receiver = spell(func.value) if hasattr(func, "value") else None
        if receiver:
            names.add(receiver)
    return names


def _from_model_output(ctx: Context, binding: Binding, names: set[tuple[str, str]]) -> bool:
    """Whether the statement binds `binding.target` straight from a call of the model
    (`loss = model(x, y)`, `logits, loss = model(x, y)`) or from its output's attribute or item
    (`loss = outputs.loss`, `loss = out[0]` with `out = model(...)`)."""
    import libcst as cst

    from migrate.analysis.index import spell

    value = binding.node.value
    scope = binding.place.scope.name
    if isinstance(value, cst.Call) and (spell(value.func), scope) in names:
        return True
    if isinstance(value, (cst.Attribute, cst.Subscript)) and isinstance(value.value, cst.Name):
        outputs = ctx.index.bindings_of_in(value.value.value, binding.place.scope)
        return any(isinstance(o.node.value, cst.Call) and (spell(o.node.value.func), scope) in names for o in outputs)
    return False


def conversion() -> Conversion:
    from migrate.steps.trained_models import refuse_unwrappable
    from migrate.steps.base import Wrapper
    from migrate.steps.wrap_model import wrap_models

    wrapper = Wrapper(code=data_parallel_wrap, safe=DATA_PARALLEL_ANSWERS)
    steps = (refuse_unwrappable, model_on_first_gpu, wrap_models, gathered_losses, quick_check_note)
    return Conversion(steps=steps, artifacts=lambda path, ctx: [],
                      runtime=None, wrapper=wrapper)


DP = Target(
    name="dp",
    framework="nn.DataParallel",
    summary="nn.DataParallel: one process drives every GPU of one machine (a quick check).",
    description=(
        "Wraps each trained model in nn.DataParallel once it is placed and loaded; later uses (state_dict,\n"
        "attributes, custom methods) go through `.module`, so checkpoints keep plain keys. No launcher:\n"
        "run the script as before. For training on several GPUs, use to-ddp: DataParallel is slower and\n"
        "stops at one machine."
    ),
    example="migrate to-dp train.py | git apply",
    conversion=conversion,
    markers={"torch.nn.DataParallel": "nn.DataParallel", "torch.nn.parallel.DataParallel": "nn.DataParallel",
             "torch.nn.parallel.data_parallel": "nn.DataParallel"},
    codes={"MIG201": (Severity.WARNING, "to-dp: the model stays on the CPU (file left unchanged), or its device may be "
                                        "the CPU or a GPU other than the first where nn.DataParallel wants cuda:0")},
)
