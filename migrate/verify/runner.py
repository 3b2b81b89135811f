"""The process side of `migrate verify`: runs a training script as `__main__` and records what it does.

Started once per rank by the target's launcher (torchrun, the deepspeed launcher) or by plain
`python` for the original script:

    python -m migrate.verify.runner --record DIR --root FOLDER [--steps N] [--timeout S] [--fake-data]
                                    SCRIPT [SCRIPT_ARGS...]

The user's files are never edited. Everything is learned from hooks torch offers to everyone:
- optimizer step post-hooks count steps, record a digest of the trained parameters after each
  step, and end the rank cleanly once every optimizer has stepped N times;
- module forward pre-hooks record a digest of the first top-level forward's input of each step,
  and the state-dict layout of each top-level module;
- `print`, `logging`, `open(..., "w")` and `torch.save` are wrapped to note what the user's code
  (files under --root) prints and writes;
- faulthandler dumps every thread's stack when the timeout passes or the launcher terminates the
  rank, so a rank that waits forever says where.

Each rank appends JSON lines to DIR/rank<R>.jsonl as things happen (a rank killed halfway still
leaves what it saw) and its stacks to DIR/rank<R>.stack. Exit status 0 when the script reached N
steps or ended by itself, 1 when it raised.
"""

from __future__ import annotations

import argparse
import builtins
import faulthandler
import hashlib
import json
import logging
import os
import runpy
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

MAX_TEXT = 300  # characters of a printed line or an error kept in the record
# Frames of these libraries end the search for the user's frame: what they print or write on
# their own (DeepSpeed's op builds, torch.distributed's rendezvous) is not the script's output.
LIBRARY_INTERNALS = ("/deepspeed/", "/torch/distributed/", "/torch/utils/cpp_extension", "/torch/_")
WRITE_DEPTH = 6  # torch.save, numpy.save, PIL's save...: a user's write is at most this far above open()


class StopVerify(BaseException):
    """Raised from the optimizer step hook once enough steps ran; not an Exception, so a script's
    `except Exception:` cannot swallow it."""


class Recorder:
    """Appends one JSON object per event to this rank's record file."""

    def __init__(self, folder: Path, rank: int, root: Path) -> None:
        self.root = str(root.resolve())
        self.folder = str(folder.resolve())
        self.stream = open(folder / f"rank{rank}.jsonl", "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)

    def event(self, kind: str, **fields: Any) -> None:
        self.stream.write(json.dumps({"kind": kind, **fields}, default=str) + "\n")
        self.stream.flush()

    def user_frame(self, within: int = 1000) -> str | None:
        """`file:line` of the innermost frame in the user's code (a file under --root), looking at
        most `within` frames above the caller (a library's own prints and files are not the user's)."""
        frame = sys._getframe(2)
        while frame is not None and within > 0:
            filename = frame.f_code.co_filename
            if filename.startswith(self.root) and not filename.startswith(self.folder):
                return f"{os.path.relpath(filename, self.root)}:{frame.f_lineno}"
            if any(part in filename for part in LIBRARY_INTERNALS):
                return None
            frame = frame.f_back
            within -= 1
        return None


class Probe:
    """The hooks of one rank, and the counts they keep."""

    def __init__(self, recorder: Recorder, steps: int, stop_at_next_forward: bool = False) -> None:
        self.recorder = recorder
        self.steps = steps
        # --compare: stop at the forward after the last step, once every framework has written the
        # stepped weights back into the model (DeepSpeed's ZeRO copies them after the base step)
        self.stop_at_next_forward = stop_at_next_forward
        self.stop_pending = False
        self.loss_recorded_for = 0
        self.stepped: set[int] = set()  # ids of the parameters the optimizers hold
        self.counts: dict[int, int] = {}  # optimizer id -> steps taken
        self.step_depth: dict[int, int] = {}  # optimizer id -> step() calls under way (nested: Horovod)
        self.total = 0
        self.depth = 0
        self.models: list[Any] = []  # top-level modules seen in a forward, in order
        self.input_recorded_for = -1  # the step whose first forward input is recorded

    # -- forwards ------------------------------------------------------------------------------
    def forward_pre(self, module: Any, args: tuple[Any, ...]) -> None:
        self.depth += 1
        if self.depth != 1:
            return
        if self.stop_pending:
            self.depth = 0
            raise StopVerify
        if not has_parameters(module):
            return  # a transform or a loss function, not a model being trained
        if not any(m is module for m in self.models):
            self.models.append(module)
            self.recorder.event("model", index=len(self.models) - 1, name=module_name(module),
                                state_dict=layout(module), where=self.recorder.user_frame())
        if self.input_recorded_for < self.total:
            self.input_recorded_for = self.total
            tensor = first_tensor(args)
            self.recorder.event("input", step=self.total + 1, model=module_name(module),
                                digest=digest([tensor]) if tensor is not None else None,
                                where=self.recorder.user_frame())

    def forward_post(self, module: Any, args: tuple[Any, ...], output: Any) -> None:
        self.depth = max(0, self.depth - 1)

    # -- optimizer steps -----------------------------------------------------------------------
    def step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.step_depth[id(optimizer)] = self.step_depth.get(id(optimizer), 0) + 1

    def step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        key = id(optimizer)
        # hvd.DistributedOptimizer's step() runs its torch class's step(): torch calls the step
        # hooks around both, and only the outer one is the script's step
        self.step_depth[key] = self.step_depth.get(key, 1) - 1
        if self.step_depth[key] > 0:
            return
        if key not in self.counts:
            self.note_optimizer(optimizer)
        self.counts[key] = self.counts.get(key, 0) + 1
        self.total += 1
        trained = self.trained_models()
        params = {f"{i}:{module_name(m)}": parameter_digest(m) for i, m in enumerate(self.models)
                  if any(m is t for t in trained)}
        self.recorder.event("step", n=self.total, optimizer=type(optimizer).__name__,
                            params=params, where=self.recorder.user_frame())
        if min(self.counts.values()) >= self.steps or max(self.counts.values()) >= 10 * self.steps:
            if not self.stop_at_next_forward:
                raise StopVerify
            self.stop_pending = True

    def note_optimizer(self, optimizer: Any) -> None:
        for group in optimizer.param_groups:
            self.stepped.update(id(p) for p in group["params"])

    def trained_models(self) -> list[Any]:
        """The models whose parameters an optimizer steps (an untrained baseline, an evaluation copy
        or a frozen encoder may differ across ranks at will). When no model holds them (DeepSpeed's
        ZeRO steps flat copies), every model with trainable parameters."""
        held = [m for m in self.models if any(id(p) in self.stepped for p in m.parameters())]
        return held or [m for m in self.models if any(p.requires_grad for p in m.parameters())]

    def backward(self, loss: Any) -> None:
        """The first scalar backward of each step: that step's loss on this rank."""
        if loss.numel() == 1 and self.loss_recorded_for <= self.total:
            self.loss_recorded_for = self.total + 1
            self.recorder.event("loss", step=self.total + 1, value=float(loss.detach().float()))

    def save_weights(self, path: Path, rank: int) -> None:
        """The state dicts of the trained top-level models, unwrapped (for --compare), written by
        rank 0. Every rank calls it: FSDP's sharded weights are gathered by all of them."""
        import torch

        weights = {}
        for i, model in enumerate(self.models):
            inner = getattr(model, "module", model)
            if isinstance(inner, torch.nn.Module) and parameter_digest(inner) not in (None, "partitioned"):
                weights[f"{i}:{module_name(model)}"] = {k: whole(v).detach().cpu() for k, v in inner.state_dict().items()}
        if rank == 0:
            torch.save(weights, path)


def module_name(module: Any) -> str:
    """The user's class name, seen through a DDP wrapper or a DeepSpeed engine."""
    inner = getattr(module, "module", None)
    import torch

    if isinstance(inner, torch.nn.Module):
        return type(inner).__name__
    return type(module).__name__


def has_parameters(module: Any) -> bool:
    return next(iter(module.parameters()), None) is not None


def layout(module: Any) -> dict[str, list[Any]]:
    """{key: [shape..., dtype]} of a module's state dict."""
    try:
        return {key: [*value.shape, str(value.dtype)] for key, value in module.state_dict().items() if hasattr(value, "shape")}
    except Exception as error:  # a state dict that needs a collective or is not ready yet
        return {"<unreadable>": [type(error).__name__]}


def first_tensor(value: Any, depth: int = 0) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if depth > 3:
        return None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = first_tensor(item, depth + 1)
        if found is not None:
            return found
    return None


def digest(tensors: list[Any]) -> str:
    import torch

    hasher = hashlib.sha1()
    for tensor in tensors:
        data = tensor.detach().cpu().contiguous()
        hasher.update(str((tuple(data.shape), str(data.dtype))).encode())
        if data.numel():
            hasher.update(data.view(-1).view(torch.uint8).numpy().tobytes())
    return hasher.hexdigest()[:16]


def parameter_digest(module: Any) -> str | None:
    params = list(module.parameters())
    if not params:
        return None
    if any(hasattr(p, "ds_id") for p in params):
        return "partitioned"  # ZeRO-3: each rank holds its own shard
    if any(is_sharded(p) for p in params):
        return "sharded"  # FSDP: each rank holds its own shard
    return digest(params)


def is_sharded(tensor: Any) -> bool:
    """A DTensor (FSDP2's parameters and state dict entries)."""
    return type(tensor).__name__ == "DTensor" and hasattr(tensor, "full_tensor")


def whole(tensor: Any) -> Any:
    """The full tensor: a DTensor's shards gathered from every rank (a collective)."""
    return tensor.full_tensor() if is_sharded(tensor) else tensor


def state_dicts_in(obj: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """(the class of a whole module that was pickled, or None; the state dicts found in `obj`)."""
    import torch

    if isinstance(obj, torch.nn.Module):
        return module_name(obj) + (" (wrapped)" if module_name(obj) != type(obj).__name__ else ""), []
    if not isinstance(obj, dict):
        return None, []
    tensors = {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
    if tensors and len(tensors) * 2 >= len(obj):
        return None, [{"key": None, "layout": {k: [*v.shape, str(v.dtype)] for k, v in tensors.items()}}]
    found = []
    for key, value in obj.items():
        pickled, inner = state_dicts_in(value)
        if pickled:
            return pickled, []
        found += [{"key": str(key), "layout": d["layout"]} for d in inner if d["key"] is None]
    return None, found


def install_output_hooks(recorder: Recorder) -> None:
    real_print = builtins.print

    def print_(*args: Any, **kwargs: Any) -> None:
        where = recorder.user_frame(within=1)
        if where is not None and kwargs.get("file") in (None, sys.stdout, sys.stderr):
            text = kwargs.get("sep", " ").join(str(a) for a in args)
            recorder.event("print", text=text[:MAX_TEXT], where=where)
        real_print(*args, **kwargs)

    builtins.print = print_

    real_call_handlers = logging.Logger.callHandlers

    def call_handlers(self: logging.Logger, record: logging.LogRecord) -> None:
        if record.pathname.startswith(recorder.root) and _would_emit(self, record):
            recorder.event("log", text=str(record.getMessage())[:MAX_TEXT], level=record.levelname,
                           where=f"{os.path.relpath(record.pathname, recorder.root)}:{record.lineno}")
        real_call_handlers(self, record)

    logging.Logger.callHandlers = call_handlers  # type: ignore[method-assign]

    real_open = builtins.open
    ignored = (recorder.folder, "/dev/", "/proc/", os.path.expanduser("~/.cache"), sys.prefix)

    def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+"):
            path = os.path.abspath(os.fspath(file))
            where = recorder.user_frame(within=WRITE_DEPTH)
            if where is not None and not path.startswith(ignored):
                recorder.event("write", path=path, where=where)
        return real_open(file, mode, *args, **kwargs)

    builtins.open = open_


def _would_emit(logger: logging.Logger, record: logging.LogRecord) -> bool:
    current: logging.Logger | None = logger
    while current is not None:
        if any(record.levelno >= h.level for h in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent  # type: ignore[assignment]
    return record.levelno >= logging.WARNING  # logging.lastResort


def install_save_hook(recorder: Recorder) -> None:
    import torch

    real_save = torch.save

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, os.PathLike)):
            pickled, found = state_dicts_in(obj)
            recorder.event("save", path=os.path.abspath(os.fspath(f)), module=pickled, state_dicts=found,
                           where=recorder.user_frame())
        return real_save(obj, f, *args, **kwargs)

    torch.save = save


def install_training_hooks(probe: Probe) -> None:
    import torch
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_module_forward_pre_hook(probe.forward_pre)
    register_module_forward_hook(probe.forward_post, always_call=True)
    register_optimizer_step_pre_hook(probe.step_pre)
    register_optimizer_step_post_hook(probe.step_post)
    real_backward = torch.Tensor.backward

    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        probe.backward(self)
        return real_backward(self, *args, **kwargs)

    torch.Tensor.backward = backward  # type: ignore[method-assign]


def install_compare_hooks(batch_scale: int) -> None:
    """--compare: no shuffling anywhere, and the original's batches `batch_scale` times larger, so
    N ranks at batch B see, step by step, what the original sees at batch N*B."""
    import torch.utils.data as data

    real_loader_init = data.DataLoader.__init__

    def loader_init(self: Any, dataset: Any, batch_size: Any = 1, shuffle: Any = None, *args: Any, **kwargs: Any) -> None:
        if isinstance(batch_size, int) and kwargs.get("batch_sampler") is None:
            batch_size *= batch_scale
        if kwargs.get("sampler") is None and not isinstance(dataset, data.IterableDataset):
            shuffle = False
        real_loader_init(self, dataset, batch_size, shuffle, *args, **kwargs)

    data.DataLoader.__init__ = loader_init  # type: ignore[method-assign]
    real_sampler_init = data.distributed.DistributedSampler.__init__

    def sampler_init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_sampler_init(self, *args, **kwargs)
        self.shuffle = False

    data.distributed.DistributedSampler.__init__ = sampler_init  # type: ignore[method-assign]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m migrate.verify.runner")
    parser.add_argument("--record", required=True, type=Path)
    parser.add_argument("--root", required=True, type=Path, help="the folder whose code is the user's")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--fake-data", action="store_true")
    parser.add_argument("--compare-batch-scale", type=int, default=0, help="--compare: batch multiplier (0: off)")
    # the deepspeed launcher puts this right after the module name; it belongs to the script
    parser.add_argument("--local_rank", "--local-rank", dest="local_rank", default=None)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    options = parse(sys.argv[1:] if argv is None else argv)
    rank = int(os.environ.get("RANK", os.environ.get("HOROVOD_RANK", "0")))  # torchrun's, or horovodrun's
    options.record.mkdir(parents=True, exist_ok=True)
    stacks = open(options.record / f"rank{rank}.stack", "w")  # noqa: SIM115
    faulthandler.dump_traceback_later(options.timeout, exit=True, file=stacks)
    faulthandler.register(signal.SIGTERM, file=stacks, all_threads=True, chain=True)
    recorder = Recorder(options.record, rank, options.root)
    recorder.event("start", rank=rank, root=recorder.root, world_size=int(os.environ.get("WORLD_SIZE", os.environ.get("HOROVOD_SIZE", "1"))), pid=os.getpid())
    compare = options.compare_batch_scale > 0
    probe = Probe(recorder, options.steps, stop_at_next_forward=compare)
    install_training_hooks(probe)
    if compare:
        install_compare_hooks(options.compare_batch_scale)
    install_save_hook(recorder)
    if options.fake_data:
        from migrate.verify.fake_data import install_fake_datasets

        recorder.event("fake_data", datasets=install_fake_datasets())
    install_output_hooks(recorder)
    script = str(Path(options.script).resolve())
    launcher_args = [f"--local_rank={options.local_rank}"] if options.local_rank is not None else []
    sys.argv = [script, *options.args, *launcher_args]
    sys.path.insert(0, os.path.dirname(script))
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
        recorder.event("end", outcome="finished", steps=probe.total)
    except StopVerify:
        recorder.event("end", outcome="stopped", steps=probe.total)
        _wait_for_the_other_ranks()
    except SystemExit as exit_:
        if exit_.code in (None, 0):
            recorder.event("end", outcome="finished", steps=probe.total)
        else:
            recorder.event("end", outcome="error", steps=probe.total, error=f"SystemExit({exit_.code!r})"[:MAX_TEXT],
                           where=None)
            status = 1
    except BaseException as error:  # noqa: BLE001 (everything the script raises is what verify reports)
        where = _where_in(error, recorder.root)
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
        recorder.event("end", outcome="error", steps=probe.total, error=text[-MAX_TEXT * 3:], where=where)
        traceback.print_exc()
        status = 1
    if compare and status == 0:
        probe.save_weights(options.record / "weights.pt", rank)
    faulthandler.cancel_dump_traceback_later()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no interpreter teardown: the script's process group may still be alive


def _wait_for_the_other_ranks() -> None:
    """After N steps every rank stops; the barrier keeps a fast rank from closing its sockets
    while a slow one still reads from them."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()
        horovod = sys.modules.get("horovod.torch")
        if horovod is not None and horovod.is_initialized():
            horovod.barrier()
    except Exception:  # noqa: BLE001 (a broken group is reported by the other checks)
        pass


def _where_in(error: BaseException, root: str) -> str | None:
    """`file:line` of the innermost traceback frame in the user's code."""
    where = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename.startswith(root):
            where = f"{os.path.relpath(frame.filename, root)}:{frame.lineno}"
    return where


if __name__ == "__main__":
    main()
