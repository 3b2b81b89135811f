"""Pretend-GPU mode: run a training script's GPU path on the CPU and stop where a GPU would.

`install()` (called in a process before the script runs) makes torch believe it has CUDA devices
while every tensor stays in CPU memory, and remembers, per tensor, the device the script sent it
to. `python -m migrate.verify.pretend_gpu SCRIPT [ARGS...]` runs a script under it, also under
torchrun: `python -m torch.distributed.run --nproc-per-node 2 -m migrate.verify.pretend_gpu SCRIPT`.

What the script sees:
- `torch.cuda.is_available()` is true; `torch.cuda.device_count()` is MIGRATE_PRETEND_GPUS, else
  LOCAL_WORLD_SIZE, else 1; `set_device`, `current_device`, `torch.cuda.device(i)` keep a current
  pretend device, and "cuda" without an index means it; an index past the count is an error, as on
  a real machine. `torch.accelerator` and `torch._C._get_accelerator()` say "cuda" too (FSDP2's
  default mesh is a CUDA mesh, as on a GPU machine).
- `.cuda()`, `.to("cuda:1")`, `.to(other_tensor)`, `.type(torch.cuda.FloatTensor)`,
  `device="cuda"` (or an int) in a factory function, `torch.device(1)`, and `nn.Module.to/cuda`
  (through `param.data = ...`) give CPU tensors tagged with their pretend device; `t.device`,
  `t.is_cuda`, `t.type()` and `t.get_device()` report it; the outputs of every operation inherit
  the device of its inputs (a TorchFunctionMode), gradients the device of their parameter,
  `nn.Parameter(t)` the device of `t`; `.cpu()` gives an untagged copy. `loss.backward()` runs
  with the mode on, so backward hooks (FSDP's, the script's) see the pretend GPU too.
- `torch.cuda.synchronize`, streams, events, `record_stream`, `empty_cache` and seeding do nothing
  (`torch.cuda.manual_seed` leaves the CPU generator alone, as on a GPU machine);
  `torch.cuda.memory_*` return 0; autocast("cuda") and GradScaler run as they would with CPU
  tensors (CUDA autocast does not apply to CPU tensors: it computes in float32); DataLoader's
  `pin_memory` is turned off.
- `dist.init_process_group("nccl")` (and `new_group(backend="nccl")`) make a gloo group, and the
  group is remembered as NCCL-only (`device_id` and `pg_options` are dropped). A backend string
  with a CPU part ("cpu:gloo,cuda:nccl") is not: torch sends CPU tensors to gloo there, so they
  are no error. Object collectives on an NCCL-only group move their bytes to the pretend GPU, as
  torch does on a GPU machine; `barrier` runs gloo's CPU barrier.

Where it stops (PretendGPUError, a RuntimeError whose text starts with "pretend GPU:" and names
the innermost frame outside torch, outside migrate/, outside site-packages and the standard
library, then the user's frames that called it):
- an operation meets tensors on two devices (a CPU tensor of 0 dimensions is allowed beside a
  GPU one, as in torch); inside a module's forward it says "model on cuda:0, input on cpu";
- a collective (all_reduce, broadcast, reduce, all_gather(_into_tensor), reduce_scatter(_tensor),
  gather, scatter, all_to_all(_single), send/recv/isend/irecv) on an NCCL-only group gets a
  tensor that is not on a pretend GPU, or DistributedDataParallel wraps a model whose parameters
  are not on one under an NCCL-only group (DDP's own collectives are C++; this is where NCCL
  would refuse them);
- `.numpy()` of a tensor on a pretend GPU; a device index past the device count.
  (`get_device_properties` reports 80 GiB of total memory, so nn.DataParallel's balance check,
  which divides by it, runs.)

What it cannot model:
- nn.DataParallel over several devices (its scatter and replicate are CUDA-only C++): on one
  device (the original, one pretend GPU) it moves the inputs and runs the module, as it does there;
- CUDA kernels, their numerics (TF32, cuDNN algorithms, float16 overflow that autocast would
  cause) and custom CUDA ops (torchvision.ops, apex, flash attention, bitsandbytes, DeepSpeed's
  CUDA ops): they run on CPU or fail as they would on CPU;
- streams, events and asynchrony: everything is synchronous, so a missing synchronize is never
  found; memory: no out-of-memory, `memory_*` are 0, `pin_memory` is a no-op;
- the DeepSpeed engine's device: DeepSpeed picks its accelerator itself; with DS_ACCELERATOR=cpu
  (as verify sets it) the engine keeps the model on the CPU, so a script that sends its batches
  to "cuda" gets a false alarm; with its CUDA accelerator it would try to build CUDA ops;
- torch.compile, CUDA graphs, `torch.cuda.Generator`, `torch.cuda.get_rng_state`;
- code that asks C++ for the device (`t.device` read inside a C++ op, DDP's reducer, c10d
  internals) sees the CPU; tensors made in C++ outside an operation (autograd's gradients before
  `.grad` is read, `torch.from_numpy`, unpickled tensors) are CPU tensors until an operation or
  `.grad` tags them; `torch.load` honours a CUDA `map_location` but a checkpoint saved under this
  mode holds CPU tensors, so loading one without `map_location` gives CPU tensors where a GPU
  machine would give CUDA ones;
- `dist.get_backend()` says "gloo"; groups made by DeviceMesh for sub-meshes and functional
  collectives (DTensor's redistribution) are not checked for NCCL; two ranks on one device
  (NCCL's "Duplicate GPU detected") is not caught;
- `torch.autograd.grad(...)` runs its hooks with the mode off (only `backward` turns it back on);
- threads other than the one that called `install()` (DataLoader's pin-memory thread, a
  script's own threads) do not tag or check; DataLoader worker processes forked after it do.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import runpy
import sys
import sysconfig
from collections.abc import Callable, Iterator
from types import FrameType, SimpleNamespace
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["PretendGPUError", "device_of", "install", "main"]

REAL_ACCELERATOR = torch._C._get_accelerator
TAG = "_pretend_device"  # the attribute a tensor's pretend CUDA index is kept in (absent: CPU)


class PretendGPUError(RuntimeError):
    """What a GPU would have refused; the text starts with "pretend GPU:" and the user's file:line."""


class _State:
    count = 1
    current = 0
    installed = False
    nccl_groups: dict[int, Any] = {}  # id(group) -> group, for groups asked for NCCL alone


STATE = _State()

# ---------------------------------------------------------------- where in the user's code


def _library_folders() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # migrate/
    folders = {os.path.dirname(torch.__file__), here, paths["stdlib"], paths["purelib"], paths["platlib"]}
    return tuple(os.path.join(os.path.realpath(folder), "") for folder in folders)


LIBRARY = _library_folders()


def _is_users(filename: str) -> bool:
    return not filename.startswith("<") and not os.path.realpath(filename).startswith(LIBRARY)


def _shown(filename: str) -> str:
    path = os.path.realpath(filename)
    cwd = os.path.join(os.path.realpath(os.getcwd()), "")
    return os.path.relpath(path, cwd) if path.startswith(cwd) else filename


def user_frames(limit: int = 4) -> list[str]:
    """`file:line` of the user's frames on the stack, innermost first."""
    found: list[str] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and len(found) < limit:
        if _is_users(frame.f_code.co_filename):
            found.append(f"{_shown(frame.f_code.co_filename)}:{frame.f_lineno}")
        frame = frame.f_back
    return found


def refuse(what: str) -> PretendGPUError:
    """The error to raise: the innermost user frame first, its callers after."""
    frames = user_frames()
    where = frames[0] if frames else "<no user frame>"
    called = f" (called from {', '.join(frames[1:])})" if len(frames) > 1 else ""
    return PretendGPUError(f"pretend GPU: {where}: {what}{called}")


# ---------------------------------------------------------------- devices


def device_of(tensor: Any) -> int | None:
    """The pretend CUDA index of a tensor, None for the CPU."""
    index = getattr(tensor, TAG, None)
    if index is None and type(tensor).__name__ == "DTensor":
        mesh = getattr(tensor, "device_mesh", None)
        if mesh is not None and mesh.device_type == "cuda":
            return STATE.current
    return index


def _name(index: int | None) -> str:
    return "cpu" if index is None else f"cuda:{index}"


def _tag(tensor: torch.Tensor, index: int | None) -> None:
    if index is None:
        if TAG in getattr(tensor, "__dict__", {}):
            delattr(tensor, TAG)
    else:
        setattr(tensor, TAG, index)


def _checked(index: int) -> int:
    if not 0 <= index < STATE.count:
        raise refuse(f"CUDA device {index} does not exist: this machine has {STATE.count} (invalid device ordinal)")
    return index


def cuda_index(device: Any) -> tuple[bool, int | None]:
    """(is this a device argument at all, its pretend index or None for the CPU)."""
    if device is None:
        return False, None
    if isinstance(device, int) and not isinstance(device, bool):
        return True, _checked(device)
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "cuda":
            return True, None
        return True, _checked(STATE.current if device.index is None else device.index)
    return False, None


def _set_current(device: Any) -> None:
    if isinstance(device, int) and not isinstance(device, bool):
        STATE.current = _checked(device)
        return
    known, index = cuda_index(device)
    if known and index is not None:
        STATE.current = index


# ---------------------------------------------------------------- the TorchFunctionMode


def _tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 3 and isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item, depth + 1)


def _module_forwards() -> list[torch.nn.Module]:
    """The modules whose forward is on the stack, innermost first."""
    modules: list[torch.nn.Module] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self") if frame.f_code.co_name == "forward" else None
        if isinstance(owner, torch.nn.Module) and (not modules or modules[-1] is not owner):
            modules.append(owner)
        frame = frame.f_back
    return modules


def _mismatch(func: Any, first: torch.Tensor, other: torch.Tensor) -> PretendGPUError:
    name = getattr(func, "__name__", str(func))
    a, b = _name(device_of(first)), _name(device_of(other))
    parameter = next((t for t in (first, other) if isinstance(t, torch.nn.Parameter)), None)
    modules = _module_forwards()
    if parameter is not None and modules:
        model = _name(device_of(parameter))
        data = b if parameter is first else a
        inner = f" (in its {type(modules[0]).__name__})" if len(modules) > 1 else ""
        return refuse(f"model on {model}, input on {data}: the forward of {type(modules[-1]).__name__}{inner} "
                      f"calls {name} with its parameters on {model} and an input on {data}")
    return refuse(f"{name} got tensors on two devices, {a} and {b} (expected all tensors to be on the same device)")


def common_device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int | None, set[int]]:
    """The device of an operation's inputs (None: CPU) and the ids of its input tensors; raises on two."""
    seen: torch.Tensor | None = None
    scalar_device: int | None = None
    ids: set[int] = set()
    for tensor in _tensors((args, kwargs)):
        ids.add(id(tensor))
        index = device_of(tensor)
        if tensor.dim() == 0 and index is None:
            continue  # a CPU scalar goes with any device
        if tensor.dim() == 0:
            scalar_device = index
            continue
        if seen is None:
            seen = tensor
        elif device_of(seen) != index and not (tensor.is_meta or seen.is_meta):
            raise _mismatch(func, seen, tensor)
    return (device_of(seen) if seen is not None else scalar_device), ids


def _tag_outputs(value: Any, index: int | None, inputs: set[int]) -> None:
    for tensor in _tensors(value):
        if id(tensor) not in inputs:
            _tag(tensor, index)


class PretendMode(TorchFunctionMode):
    """Tags every operation's outputs with its inputs' pretend device and refuses two devices."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = dict(kwargs or {})
        special = SPECIAL.get(func)
        if special is not None:
            return special(func, args, kwargs)
        if func in UNCHECKED:
            result = func(*args, **kwargs)
            if args and isinstance(args[0], torch.Tensor):
                _tag_outputs(result, device_of(args[0]), {id(args[0])})
            return result
        explicit, target = cuda_index(kwargs.get("device"))
        if explicit:
            kwargs["device"] = "cpu"
        index, inputs = common_device(func, args, kwargs)
        result = func(*args, **kwargs)
        _tag_outputs(result, target if explicit else index, inputs)
        return result


MODE = PretendMode()


def _copy(tensor: torch.Tensor, index: int | None, **options: Any) -> torch.Tensor:
    """What `.to(device)` gives: the tensor itself when nothing changes, else a tagged copy."""
    dtype = options.get("dtype")
    if device_of(tensor) == index and not options.get("copy") and (dtype is None or dtype == tensor.dtype):
        return tensor
    memory_format = options.get("memory_format") or torch.preserve_format
    result = tensor.to(dtype=dtype or tensor.dtype, memory_format=memory_format, copy=True)
    _tag(result, index)
    return result


def _to(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tensor, rest = args[0], list(args[1:])
    target = device_of(tensor)
    if rest and isinstance(rest[0], torch.Tensor):
        other = rest.pop(0)
        target = device_of(other)
        kwargs.setdefault("dtype", other.dtype)
    else:
        device = kwargs.pop("device", None)
        if rest and not isinstance(rest[0], torch.dtype):
            device = rest.pop(0)
        explicit, index = cuda_index(device)
        if explicit:
            target = index
        if rest and isinstance(rest[0], torch.dtype):
            kwargs["dtype"] = rest.pop(0)
        if rest:
            kwargs["non_blocking"] = rest.pop(0)
        if rest:
            kwargs["copy"] = rest.pop(0)
    kwargs.pop("non_blocking", None)
    return _copy(tensor, target, **kwargs)


def _parse_to(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`Module.to`'s reading of its arguments: a CUDA device comes back as a torch.device."""
    rest = list(args)
    if rest and isinstance(rest[0], torch.Tensor):
        tensor = rest.pop(0)
        index = device_of(tensor)
        device, dtype, non_blocking, memory_format = func(tensor, *rest, **kwargs)
        return (torch.device("cuda", index) if index is not None else device), dtype, non_blocking, memory_format
    explicit, index = cuda_index(kwargs.get("device"))
    if explicit:
        kwargs["device"] = "cpu"
    elif rest and not isinstance(rest[0], torch.dtype):
        explicit, index = cuda_index(rest[0])
        if explicit:
            rest[0] = "cpu"
    device, dtype, non_blocking, memory_format = func(*rest, **kwargs)
    if explicit and index is not None:
        device = torch.device("cuda", index)
    return device, dtype, non_blocking, memory_format


def _cuda(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    device = args[1] if len(args) > 1 else kwargs.get("device")
    if device is None:
        index: int | None = STATE.current
    elif isinstance(device, int) and not isinstance(device, bool):
        index = _checked(device)
    else:
        index = cuda_index(device)[1]
    return _copy(args[0], index, memory_format=kwargs.get("memory_format"))


def _cpu(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _copy(args[0], None, memory_format=kwargs.get("memory_format"))


def _type(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`t.type(torch.cuda.FloatTensor)` goes to the GPU, `t.type(torch.FloatTensor)` to the CPU,
    `t.type(torch.float16)` stays; `t.type()` names the pretend device's type."""
    tensor, wanted = args[0], (args[1] if len(args) > 1 else kwargs.pop("dtype", None))
    if wanted is None:
        name = func(tensor)
        return name if device_of(tensor) is None else name.replace("torch.", "torch.cuda.", 1)
    if isinstance(wanted, torch.dtype):
        return _copy(tensor, device_of(tensor), dtype=wanted)
    name = wanted if isinstance(wanted, str) else f"{wanted.__module__}.{wanted.__name__}"
    target = STATE.current if name.startswith("torch.cuda.") else None
    result = func(tensor, name.replace("torch.cuda.", "torch.", 1), **kwargs)
    if result is tensor and device_of(tensor) != target:
        result = tensor.clone()
    _tag(result, target)
    return result


def _numpy(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    index = device_of(args[0])
    if index is not None:
        raise refuse(f"can't convert cuda:{index} device type tensor to numpy; use Tensor.cpu() to copy it to host memory first")
    return func(*args, **kwargs)


def _device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    index = device_of(args[0])
    return func(*args) if index is None else torch.device("cuda", index)


def _is_cuda(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return device_of(args[0]) is not None


def _get_device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    index = device_of(args[0])
    return -1 if index is None else index


def _grad(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    grad = func(*args)
    if isinstance(grad, torch.Tensor):
        _tag(grad, device_of(args[0]))
    return grad


def _set_data(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = func(*args)
    _tag(args[0], device_of(args[1]))
    return result


def _set_grad(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(args[1], torch.Tensor):
        _tag(args[1], device_of(args[0]))
    return func(*args)


def _backward(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`loss.backward()` with the mode on: the mode is off inside __torch_function__, and the hooks
    the backward runs (FSDP's, the script's) must see the pretend GPU; so this does what
    torch.autograd.backward does after its own dispatch."""
    from torch.autograd import _make_grads, _tensor_or_tensors_to_tuple
    from torch.autograd.graph import _engine_run_backward

    names = ("gradient", "retain_graph", "create_graph", "inputs") if func is T.backward else (
        "grad_tensors", "retain_graph", "create_graph", "grad_variables", "inputs")
    options = {**dict(zip(names, args[1:])), **kwargs}
    gradient = options.get("gradient", options.get("grad_tensors", options.get("grad_variables")))
    create_graph = bool(options.get("create_graph", False))
    retain_graph = options.get("retain_graph")
    inputs = options.get("inputs")
    tensors = (args[0],) if isinstance(args[0], torch.Tensor) else tuple(args[0])
    inputs_tuple = () if inputs is None else (inputs,) if isinstance(inputs, torch.Tensor) else (
        tuple(inputs.values()) if isinstance(inputs, dict) else tuple(inputs))
    common_device(func, (tensors, gradient), {})
    with MODE:
        grads = _make_grads(tensors, _tensor_or_tensors_to_tuple(gradient, len(tensors)), is_grads_batched=False)
        _engine_run_backward(tensors, grads, create_graph if retain_graph is None else retain_graph, create_graph,
                             inputs_tuple, allow_unreachable=True, accumulate_grad=True)


def _new_device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`torch.device(1)`: an index alone names the accelerator, here a pretend GPU."""
    if len(args) == 1 and not kwargs and isinstance(args[0], int) and not isinstance(args[0], bool):
        return torch.device("cuda", _checked(args[0]))
    return func(*args, **kwargs)


def _itself(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0]


T = torch.Tensor
SPECIAL: dict[Any, Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = {
    T.to: _to, T.cuda: _cuda, T.type: _type, T.cpu: _cpu, T.numpy: _numpy, T.get_device: _get_device,
    T.device.__get__: _device, T.is_cuda.__get__: _is_cuda, T.grad.__get__: _grad,  # type: ignore[attr-defined, union-attr]  # torch's stubs type these as plain attributes (grad: Tensor | None), not the descriptors they are
    T.data.__set__: _set_data, T.grad.__set__: _set_grad,  # type: ignore[attr-defined, union-attr]  # torch's stubs type these as plain attributes (grad: Tensor | None), not the descriptors they are
    T.pin_memory: _itself, torch._C._nn._parse_to: _parse_to,
    T.backward: _backward, torch.autograd.backward: _backward, torch.device: _new_device,
}
# operations whose tensors may lie on different devices; their result goes where the first one is
UNCHECKED = {T.copy_, T.__setitem__, T.__getitem__, T.set_, torch._has_compatible_shallow_copy_type, torch.is_same_size}

# ---------------------------------------------------------------- torch.cuda and torch.accelerator


class _Event:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, other: Any) -> float:
        return 0.0


class _Stream:
    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = torch.device("cuda", STATE.current)
        self.priority = priority

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> Any:
        return event or _Event()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        return False

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class _DeviceContext:
    """`torch.cuda.device(i)`: makes i the current pretend device while it is entered."""

    def __init__(self, device: Any) -> None:
        self.index = cuda_index(device)[1] if not isinstance(device, int) else _checked(device)
        self.previous = STATE.current

    def __enter__(self) -> None:
        self.previous = STATE.current
        if self.index is not None:
            STATE.current = self.index

    def __exit__(self, *exc: object) -> None:
        STATE.current = self.previous


PRETEND_MEMORY = 80 * 2**30  # what get_device_properties says (nn.DataParallel divides by it); nothing is allocated


def _properties(device: Any = None) -> SimpleNamespace:
    return SimpleNamespace(name="pretend GPU (CPU)", total_memory=PRETEND_MEMORY, major=8, minor=0, multi_processor_count=1,
                           is_integrated=False, is_multi_gpu_board=False)


def _returning(value: Any) -> Callable[..., Any]:
    """A new function for each name (torch.compile's rules refuse one function under two names)."""

    def constant(*args: Any, **kwargs: Any) -> Any:
        return value

    return constant


def _cuda_functions() -> dict[str, Any]:
    functions: dict[str, Any] = {
        "is_available": lambda: True, "is_initialized": lambda: True, "device_count": lambda: STATE.count,
        "current_device": lambda: STATE.current, "set_device": _set_current,
        "get_device_name": lambda device=None: "pretend GPU (CPU)", "get_device_capability": lambda device=None: (8, 0),
        "get_device_properties": _properties, "is_bf16_supported": lambda *a, **k: True,
        "Stream": _Stream, "Event": _Event, "current_stream": lambda device=None: _Stream(),
        "default_stream": lambda device=None: _Stream(), "stream": lambda stream=None: contextlib.nullcontext(),
        "set_stream": _returning(None), "device": _DeviceContext, "device_of": lambda tensor: _DeviceContext(device_of(tensor)),
        "is_current_stream_capturing": lambda: False, "memory_summary": lambda *a, **k: "", "memory_stats": lambda *a, **k: {},
        "mem_get_info": lambda *a, **k: (0, 0), "utilization": _returning(0),
    }
    for name in ("synchronize", "_lazy_init", "init", "empty_cache", "ipc_collect", "manual_seed", "manual_seed_all",
                 "seed", "seed_all", "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
                 "reset_accumulated_memory_stats", "set_per_process_memory_fraction"):
        functions[name] = _returning(None)
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                 "memory_cached", "max_memory_cached"):
        functions[name] = _returning(0)
    return functions


def _patch_cuda() -> None:
    for name, value in _cuda_functions().items():
        setattr(torch.cuda, name, value)
    memory = getattr(torch.cuda, "memory", None)
    if memory is not None:
        for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "empty_cache",
                     "reset_peak_memory_stats", "memory_stats", "memory_summary", "mem_get_info"):
            setattr(memory, name, getattr(torch.cuda, name))
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        accelerator.is_available = lambda: True
        accelerator.device_count = lambda: STATE.count
        accelerator.current_accelerator = lambda check_available=False: torch.device("cuda")
        accelerator.current_device_index = lambda: STATE.current
        accelerator.current_device_idx = lambda: STATE.current
        accelerator.set_device_index = _set_current
        accelerator.set_device_idx = _set_current
        accelerator.synchronize = _returning(None)
        accelerator.current_stream = lambda device=None: _Stream()
    torch._C._get_accelerator = _get_accelerator


def _get_accelerator(check: bool = False) -> torch.device:
    """torch._C._get_accelerator, as its stub spells it (torch calls it with no argument)."""
    return torch.device("cuda")


def _patch_record_stream() -> None:
    """`t.record_stream(stream)` parses its stream in C++ before any mode sees it: a pretend
    stream is taken here, and there is nothing to record."""
    original = torch.Tensor.record_stream

    def record_stream(self: torch.Tensor, stream: Any) -> None:
        if not isinstance(stream, _Stream):
            original(self, stream)

    torch.Tensor.record_stream = record_stream  # type: ignore[method-assign,assignment]  # replaced on purpose: a CPU tensor has no stream


def _patch_data_parallel() -> None:
    """nn.DataParallel on one device (a single-GPU script that wraps its model anyway) moves the
    inputs to that device and runs the module, which is what its forward does there; its scatter
    and replicate are C++ CUDA calls the CPU build lacks, so over several devices it is refused."""
    original = torch.nn.DataParallel.forward

    def forward(self: torch.nn.DataParallel[Any], *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return original(self, *inputs, **kwargs)
        if len(self.device_ids) > 1:
            raise refuse(f"nn.DataParallel over {len(self.device_ids)} GPUs: its replication is CUDA-only and "
                         "not modelled here (verify runs the original on one pretend GPU)")
        device = self.src_device_obj
        moved = torch.utils._pytree.tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, (inputs, kwargs))
        return self.module(*moved[0], **moved[1])

    torch.nn.DataParallel.forward = forward  # type: ignore[method-assign]  # replaced on purpose: the GPU path run on the CPU


def _patch_parameter() -> None:
    """`nn.Parameter(t)` is a new Python object made in C++: it takes the device of `t`."""
    original = torch.nn.Parameter.__new__

    def new(cls: type, data: Any = None, requires_grad: bool = True) -> Any:
        parameter: torch.nn.Parameter = original(cls, data, requires_grad)
        if isinstance(data, torch.Tensor) and device_of(data) is not None:
            _tag(parameter, device_of(data))
        return parameter

    torch.nn.Parameter.__new__ = staticmethod(new)  # type: ignore[method-assign]  # replaced on purpose: the GPU path run on the CPU


def _patch_load() -> None:
    """`torch.load(map_location="cuda:1")`: loads on the CPU, tags what it loaded."""
    original = torch.load

    def load(*args: Any, **kwargs: Any) -> Any:
        explicit, index = cuda_index(kwargs.get("map_location"))
        if explicit:
            kwargs["map_location"] = "cpu"
        result = original(*args, **kwargs)
        if explicit and index is not None:
            _tag_tree(result, index)
        return result

    torch.load = load


def _tag_tree(value: Any, index: int, depth: int = 0) -> None:
    if isinstance(value, torch.Tensor):
        _tag(value, index)
    elif depth < 8 and isinstance(value, (list, tuple)):
        for item in value:
            _tag_tree(item, index, depth + 1)
    elif depth < 8 and isinstance(value, dict):
        for item in value.values():
            _tag_tree(item, index, depth + 1)


def _patch_data_loader() -> None:
    """No pinned memory without CUDA: DataLoader's pin-memory thread is never started."""
    loader = torch.utils.data.DataLoader
    original = loader.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.pin_memory = False

    loader.__init__ = init  # type: ignore[method-assign]  # replaced on purpose: the GPU path run on the CPU


# ---------------------------------------------------------------- torch.distributed

COLLECTIVES = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base",
               "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "gather", "scatter", "all_to_all",
               "all_to_all_single", "send", "recv", "isend", "irecv", "all_reduce_coalesced")


def _nccl_only(backend: Any) -> bool:
    return isinstance(backend, str) and backend.strip().lower() == "nccl"


def _gloo(backend: Any) -> Any:
    return "gloo" if isinstance(backend, str) and "nccl" in backend.lower() else backend


def _is_nccl(group: Any) -> bool:
    import torch.distributed as dist

    if group is None:
        group = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
    return group is not None and id(group) in STATE.nccl_groups


def _patch_init(c10d: Any) -> None:
    original = c10d.init_process_group

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("device_id", None)
        kwargs.pop("pg_options", None)
        original(_gloo(backend), *args, **kwargs)
        if _nccl_only(backend):
            group = c10d._get_default_group()
            STATE.nccl_groups[id(group)] = group

    original_new = c10d.new_group

    def new_group(*args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(original_new).bind_partial(*args, **kwargs).arguments
        backend = bound.pop("backend", None)
        bound.pop("device_id", None)
        bound.pop("pg_options", None)
        group = original_new(**bound, backend=_gloo(backend))
        if _nccl_only(backend) or (backend is None and _is_nccl(None)):
            STATE.nccl_groups[id(group)] = group
        return group

    original_device = c10d._get_object_coll_device

    def object_device(group: Any = None) -> Any:
        return "cuda" if _is_nccl(group) else original_device(group)

    for module in {c10d, sys.modules["torch.distributed"]}:
        module.init_process_group = init_process_group
        module.new_group = new_group
    c10d._get_object_coll_device = object_device
    c10d.is_nccl_available = lambda: True
    sys.modules["torch.distributed"].is_nccl_available = lambda: True  # type: ignore[attr-defined]  # a ModuleType from sys.modules: its attributes are not known


def _checked_collective(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def collective(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs).arguments
        if _is_nccl(bound.get("group")):
            values = [value for key, value in bound.items() if key != "group"]
            for tensor in _tensors(values):
                if device_of(tensor) is None and not tensor.is_meta:
                    raise refuse(f"{name} of a tensor on cpu under a process group created with backend 'nccl': "
                                 "NCCL only moves CUDA tensors")
        return original(*args, **kwargs)

    collective.__name__ = name
    collective.__wrapped__ = original  # type: ignore[attr-defined]  # a Callable's __wrapped__ (functools' convention) is not in typeshed
    return collective


def _patch_collectives(c10d: Any) -> None:
    public = sys.modules["torch.distributed"]
    for name in COLLECTIVES:
        original = getattr(c10d, name, None)
        if original is None:
            continue
        checked = _checked_collective(name, original)
        setattr(c10d, name, checked)
        if getattr(public, name, None) is original:
            setattr(public, name, checked)


def _patch_barrier(c10d: Any) -> None:
    """gloo's barrier makes its tensor where torch's accelerator is: the CPU here."""
    original = c10d.barrier

    def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Any:
        pretend = torch._C._get_accelerator
        torch._C._get_accelerator = REAL_ACCELERATOR
        try:
            return original(group=group, async_op=async_op)
        finally:
            torch._C._get_accelerator = pretend

    for module in {c10d, sys.modules["torch.distributed"]}:
        module.barrier = barrier


def _patch_ddp() -> None:
    from torch.nn.parallel import DistributedDataParallel

    original = DistributedDataParallel.__init__

    def init(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        group = kwargs.get("process_group")
        if _is_nccl(group):
            cpu = [name for name, p in module.named_parameters() if p.requires_grad and device_of(p) is None]
            if cpu:
                raise refuse(f"DistributedDataParallel of a model with parameters on cpu ({cpu[0]}...) under a "
                             "process group created with backend 'nccl': NCCL only moves CUDA tensors; move the "
                             "model to its GPU before wrapping it")
        original(self, module, *args, **kwargs)

    DistributedDataParallel.__init__ = init  # type: ignore[method-assign]  # replaced on purpose: the GPU path run on the CPU


def _patch_distributed() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    from torch.distributed import distributed_c10d as c10d

    _patch_init(c10d)
    _patch_collectives(c10d)
    _patch_barrier(c10d)
    _patch_ddp()


# ---------------------------------------------------------------- installing and running


def _device_count() -> int:
    for name in ("MIGRATE_PRETEND_GPUS", "LOCAL_WORLD_SIZE"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def install() -> None:
    """Make this process (its current thread) believe it has `_device_count()` CUDA devices."""
    if STATE.installed:
        return
    STATE.installed = True
    STATE.count = _device_count()
    os.environ["PYTORCH_DDP_USE_SIDE_STREAM"] = "0"  # DDP moves inputs with `.to`, not on a side stream
    _patch_cuda()
    _patch_parameter()
    _patch_record_stream()
    _patch_load()
    _patch_data_loader()
    _patch_distributed()
    _patch_data_parallel()
    # the mode stays on for the life of the process
    MODE.__enter__()  # type: ignore[no-untyped-call]  # torch's TorchFunctionMode.__enter__ has no annotations


def main(argv: list[str] | None = None) -> None:
    """`python -m migrate.verify.pretend_gpu SCRIPT [ARGS...]`: run SCRIPT as `__main__` under the mode."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m migrate.verify.pretend_gpu SCRIPT [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    script = os.path.abspath(argv[0])
    if not os.path.isfile(script):
        print(f"{argv[0]}: no such file", file=sys.stderr)
        raise SystemExit(2)
    install()
    sys.argv = [script, *argv[1:]]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
