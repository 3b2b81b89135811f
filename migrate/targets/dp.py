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

from migrate.model import Severity
from migrate.targets.base import Conversion, Target

if TYPE_CHECKING:
    import libcst as cst

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
               "splits each batch across them, so it is slower than DistributedDataParallel and cannot use a second "
               f"machine; for training, convert the original with `migrate to-ddp {ctx.script}`",
               site.wrap_after or site.wrap_before)


def first_gpu_device(ctx: Context) -> None:
    """MIG201 at a device the script may choose that is not the first GPU on a machine with GPUs
    (`"cuda" if args.cuda else "cpu"`, `torch.device("cuda", args.gpu)`): DataParallel wants the
    model on cuda:0 whenever CUDA is available; with one GPU it moves the model there itself, with
    several its first forward fails."""
    for binding in ctx.sites.device_bindings:
        assert binding.value is not None
        if _first_gpu_when_available(ctx, binding.value):
            continue
        ctx.report("MIG201", f"`{binding.target} = {ctx.code(binding.value)}` can place the model on the CPU or on a "
                   "GPU other than the first while this machine has GPUs: nn.DataParallel wants it on cuda:0 (with "
                   "one GPU it moves the model there itself, with several its first forward fails); run with the "
                   "first GPU, or convert the original with `migrate to-ddp`", binding.node)
        return


def _first_gpu_when_available(ctx: Context, value: cst.BaseExpression) -> bool:
    """Whether the device is the first GPU whenever CUDA is available (and anything without it)."""
    import libcst as cst

    from migrate.analysis.devices import is_plain_cuda

    if isinstance(value, cst.IfExp):
        tested = isinstance(value.test, cst.Call) and ctx.index.qualify(value.test.func) == "torch.cuda.is_available"
        return tested and _first_gpu_when_available(ctx, value.body)
    if isinstance(value, cst.Call) and ctx.index.qualify(value.func) == "torch.device":
        args = [a.value for a in value.args if a.keyword is None]
        if len(args) == 2:
            return is_plain_cuda(args[0]) and isinstance(args[1], cst.Integer) and args[1].value == "0"
        return len(args) == 1 and _first_gpu_when_available(ctx, args[0])
    if isinstance(value, cst.SimpleString):
        return value.evaluated_value in ("cuda", "cuda:0")
    return isinstance(value, cst.Integer) and value.value == "0"


def conversion() -> Conversion:
    from migrate.steps.trained_models import refuse_unwrappable
    from migrate.steps.wrap_model import Wrapper, wrap_models

    wrapper = Wrapper(code=data_parallel_wrap, safe=DATA_PARALLEL_ANSWERS)
    return Conversion(steps=(refuse_unwrappable, wrap_models, first_gpu_device, quick_check_note), artifacts=lambda path, ctx: [],
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
    markers={"torch.nn.DataParallel": "nn.DataParallel", "torch.nn.parallel.DataParallel": "nn.DataParallel"},
    codes={"MIG201": (Severity.WARNING, "to-dp: the model's device may be the CPU or another GPU than the first on a "
                                        "machine with GPUs, where nn.DataParallel wants it on cuda:0")},
)
