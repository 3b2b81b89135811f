"""The process side of `migrate verify`: runs a training script as `__main__` and records what it does.

Started once per rank by the target's launcher (torchrun, the deepspeed launcher, horovodrun) or
by plain `python` for the original script:

    python -m migrate.verify.runner [--local_rank=R] --record DIR --root FOLDER [--steps N] [--to-end]
                                    [--timeout S] [--fake-data] [--guard FILE] SCRIPT [SCRIPT_ARGS...]

The user's files are never edited. Everything is learned from hooks torch and Python offer to everyone:
- a step is an optimizer's step (optimizer step hooks, nested steps counted once) or, in a script
  that has stepped no optimizer yet, any change of the trainable parameters between two top-level
  forwards (params.local_signature: sampled values), so hand-written updates
  (`p.data -= lr * p.grad`, `p -= ...` under no_grad) are steps too;
- at the first top-level forward after each step, every rank records a digest of the *full*
  parameters of the trained models (FSDP2 and ZeRO-3 parameters gathered: params.py), and which
  parameters changed since the model's first forward (`params` events); the rank stops there
  (StopVerify) once every optimizer has stepped N times, unless --to-end: then the script runs
  to completion on every rank, and a crash after training is recorded like any other;
- module forward pre-hooks record a digest of the first top-level forward's input of each step,
  and the state-dict layout of each top-level module; `torch.save` notes the state dicts saved;
- writes.py records every file the rank writes and everything it prints, with the user's line;
- the guard (guard.py, --guard FILE) keeps the user's files out of reach;
- faulthandler dumps every thread's stack when the timeout passes or the launcher terminates the
  rank, so a rank that waits forever says where.

The launcher's `--local_rank=R` (the deepspeed launcher puts it right after the module name) is
handed to the script where that launcher puts it: first, before the script's own arguments, so a
parser with subcommands reads it as it would without verify.

Each rank appends JSON lines to DIR/rank<R>.jsonl as things happen (a rank killed halfway still
leaves what it saw) and its stacks to DIR/rank<R>.stack. Exit status 0 when the script reached N
steps or ended by itself, 1 when it raised.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import runpy
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from migrate.verify import writes
from migrate.verify.guard import Guard, make_private
from migrate.verify.params import (changed, combined, digest, gathered, is_partitioned, is_sharded, local_signature,
                                   parameter_digests, whole)

__all__ = ["Guard", "Probe", "Recorder", "StopVerify", "main", "make_private"]

MAX_TEXT = writes.MAX_TEXT  # characters of an error kept in the record


class StopVerify(BaseException):
    """Raised at the first forward after enough steps; not an Exception, so a script's
    `except Exception:` cannot swallow it."""


class Recorder:
    """Appends one JSON object per event to this rank's record file (from any thread)."""

    def __init__(self, folder: Path, rank: int, root: Path) -> None:
        self.root = str(root.resolve())
        self.folder = str(folder.resolve())
        self.stream = open(folder / f"rank{rank}.jsonl", "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)
        self.lock = threading.Lock()
        os.register_at_fork(after_in_child=self._fresh_lock)  # a DataLoader worker forked mid-event

    def _fresh_lock(self) -> None:
        self.lock = threading.Lock()

    def event(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"kind": kind, **fields}, default=str) + "\n"
        with self.lock:
            self.stream.write(line)
            self.stream.flush()

    def user_frame(self, within: int = 1000) -> str | None:
        """`file:line` of the innermost frame in the user's code (a file under --root), looking at
        most `within` frames above the caller (a library's own work is not the user's)."""
        return writes.user_frame(sys._getframe(1), self.root, self.folder, within)


class Probe:
    """The hooks of one rank, and the counts they keep."""

    def __init__(self, recorder: Recorder, steps: int, to_end: bool = False) -> None:
        self.recorder = recorder
        self.steps = steps
        self.to_end = to_end  # --to-end: never stop the script
        self.stop_pending = False
        self.loss_recorded_for = 0
        self.stepped: set[int] = set()  # ids of the parameters the optimizers hold
        self.counts: dict[int, int] = {}  # optimizer id -> steps taken
        self.step_depth: dict[int, int] = {}  # optimizer id -> step() calls under way (nested: Horovod)
        self.total = 0
        self.depth = 0
        self.models: list[Any] = []  # top-level modules seen in a forward, in order
        self.input_recorded_for = -1  # the step whose first forward input is recorded
        self.unread = 0  # the step whose parameters are read at the next top-level forward (0: none)
        self.signature: dict[int, str | None] | None = None  # before any optimizer step: see note_manual_step
        self.initial: dict[str, dict[str, str | None]] = {}  # model -> its parameters' digests at its first forward
        self.seen_changed: set[tuple[str, str]] = set()  # (model, parameter) seen changed since then

    # -- forwards ------------------------------------------------------------------------------
    def forward_pre(self, module: Any, args: tuple[Any, ...]) -> None:
        self.depth += 1
        if self.depth != 1:
            return
        if self.unread:
            self.record_parameters(self.unread)
        elif not self.counts and self.models:
            self.note_manual_step()
        if self.stop_pending:
            self.depth = 0
            raise StopVerify
        if not has_parameters(module):
            return  # a transform or a loss function, not a model being trained
        if not any(m is module for m in self.models):
            self.note_model(module)
        if self.input_recorded_for < self.total:
            self.input_recorded_for = self.total
            tensor = first_tensor(args)
            self.recorder.event("input", step=self.total + 1, model=module_name(module),
                                digest=digest([tensor]) if tensor is not None else None,
                                where=self.recorder.user_frame())

    def forward_post(self, module: Any, args: tuple[Any, ...], output: Any) -> None:
        self.depth = max(0, self.depth - 1)

    def note_model(self, module: Any) -> None:
        """A new top-level model: its layout, and the digest of its full parameters as they start
        (`params`, as in the `params` events; a collective where they are sharded: every rank meets
        its models in the same order)."""
        self.models.append(module)
        index = len(self.models) - 1
        start = parameter_digests(module) if any(p.requires_grad for p in module.parameters()) else None
        if start is not None:
            self.initial[model_key(index, module)] = start
        self.recorder.event("model", index=index, name=module_name(module), state_dict=layout(module),
                            params=combined(start) if start is not None else None, where=self.recorder.user_frame())
        if not self.counts:
            self.signature = local_signature(self.models)

    # -- steps ---------------------------------------------------------------------------------
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
        self.recorder.event("step", n=self.total, optimizer=type(optimizer).__name__, where=self.recorder.user_frame())
        self.unread = self.total  # DeepSpeed writes the stepped weights back after this hook
        if min(self.counts.values()) >= self.steps or max(self.counts.values()) >= 10 * self.steps:
            self.stop_pending = not self.to_end

    def note_manual_step(self) -> None:
        """No optimizer has stepped: a change of the trainable parameters since the last forward
        is a step (a hand-written update)."""
        signature = local_signature(self.models)
        before, self.signature = self.signature, signature
        if before is None or not changed(before, signature):
            return
        self.total += 1
        self.recorder.event("step", n=self.total, optimizer=None, where=self.recorder.user_frame())
        self.record_parameters(self.total)
        if self.total >= self.steps:
            self.stop_pending = not self.to_end

    def record_parameters(self, step: int) -> None:
        """The full parameters of the trained models after `step` (gathered where sharded), and the
        parameters seen changed for the first time."""
        self.unread = 0
        params: dict[str, str] = {}
        trained: list[list[str]] = []
        held = self.trained_models()
        for index, model in enumerate(self.models):
            if not any(model is m for m in held):
                continue
            key = model_key(index, model)
            digests = parameter_digests(model)
            params[key] = combined(digests)
            start = self.initial.get(key, {})
            for name, value in digests.items():
                if name in start and value != start[name] and (key, name) not in self.seen_changed:
                    self.seen_changed.add((key, name))
                    trained.append([key, name])
        sharded = any(is_sharded(p) or is_partitioned(p) for m in held for p in m.parameters())
        self.recorder.event("params", step=step, params=params, trained=trained, sharded=sharded,
                            frozen=[[key, name] for key, names in self.initial.items() for name in names
                                    if (key, name) not in self.seen_changed])

    def note_optimizer(self, optimizer: Any) -> None:
        for group in optimizer.param_groups:
            self.stepped.update(id(p) for p in group["params"])

    def trained_models(self) -> list[Any]:
        """The models whose parameters an optimizer steps (an untrained baseline, an evaluation copy
        or a frozen encoder may differ across ranks at will). When no model holds them (DeepSpeed's
        ZeRO steps flat copies; a hand-written update), every model with trainable parameters."""
        held = [m for m in self.models if any(id(p) in self.stepped for p in m.parameters())]
        return held or [m for m in self.models if any(p.requires_grad for p in m.parameters())]

    def backward(self, loss: Any) -> None:
        """The first scalar backward of each step: that step's loss on this rank."""
        if loss.numel() == 1 and self.loss_recorded_for <= self.total:
            self.loss_recorded_for = self.total + 1
            self.recorder.event("loss", step=self.total + 1, value=float(loss.detach().float()))

    def save_weights(self, path: Path, rank: int) -> None:
        """The state dicts of the top-level models, unwrapped (for --compare), written by rank 0.
        Every rank calls it: FSDP's and ZeRO-3's sharded weights are gathered by all of them."""
        import torch

        weights = {}
        for i, model in enumerate(self.models):
            inner = getattr(model, "module", model)
            if isinstance(inner, torch.nn.Module) and has_parameters(inner):
                with gathered(inner):  # ZeRO-3: whole inside, released after (hence the copies)
                    weights[model_key(i, model)] = {k: whole(v).detach().cpu().clone() for k, v in inner.state_dict().items()}
        if rank == 0:
            torch.save(weights, path)


def model_key(index: int, module: Any) -> str:
    """How a model is named in the record: its place among the top-level models, and its class."""
    return f"{index}:{module_name(module)}"


def module_name(module: Any) -> str:
    """The user's class name, seen through a DDP wrapper, a DeepSpeed engine or the class FSDP2's
    fully_shard makes (`FSDPNet`, defined in torch.distributed)."""
    import torch

    inner = getattr(module, "module", None)
    seen = inner if isinstance(inner, torch.nn.Module) else module
    return next((cls.__name__ for cls in type(seen).__mro__ if not cls.__module__.startswith("torch.distributed")),
                type(seen).__name__)


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


def install_save_hook(recorder: Recorder) -> None:
    import torch

    real_save = torch.save

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, os.PathLike)):
            sys.audit("open", os.fspath(f), "wb", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # C++ writes it: the guard's turn
            pickled, found = state_dicts_in(obj)
            recorder.event("save", path=os.path.abspath(os.fspath(f)), module=pickled, state_dicts=found,
                           where=recorder.user_frame())
        return real_save(obj, f, *args, **kwargs)

    torch.save = save


def install_training_hooks(probe: Probe) -> Callable[[], None]:
    """The probe's hooks on every module, optimizer and backward; returns what removes them."""
    import torch
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    handles = [register_module_forward_pre_hook(probe.forward_pre),
               register_module_forward_hook(probe.forward_post, always_call=True),
               register_optimizer_step_pre_hook(probe.step_pre), register_optimizer_step_post_hook(probe.step_post)]
    real_backward: Callable[..., Any] = torch.Tensor.backward  # torch leaves it unannotated

    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        probe.backward(self)
        return real_backward(self, *args, **kwargs)

    torch.Tensor.backward = backward  # type: ignore[method-assign]  # patched on purpose: the probe sees every backward

    def remove() -> None:
        for handle in handles:
            handle.remove()
        torch.Tensor.backward = real_backward  # type: ignore[method-assign]  # torch's own method put back

    return remove


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

    data.DataLoader.__init__ = loader_init  # type: ignore[method-assign]  # patched on purpose: every loader the script builds is seen
    real_sampler_init = data.distributed.DistributedSampler.__init__

    def sampler_init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_sampler_init(self, *args, **kwargs)
        self.shuffle = False

    data.distributed.DistributedSampler.__init__ = sampler_init  # type: ignore[method-assign]  # patched on purpose: every sampler is seen


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m migrate.verify.runner")
    parser.add_argument("--record", required=True, type=Path)
    parser.add_argument("--root", required=True, type=Path, help="the folder whose code is the user's")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--to-end", action="store_true", help="run the script to completion on every rank")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--fake-data", action="store_true")
    parser.add_argument("--pretend-gpu", action="store_true", help="run under migrate.verify.pretend_gpu")
    parser.add_argument("--compare-batch-scale", type=int, default=0, help="--compare: batch multiplier (0: off)")
    parser.add_argument("--guard", type=Path, default=None, help="JSON {work, protected}: see guard.Guard")
    # the deepspeed launcher puts this right after the module name; it belongs to the script
    parser.add_argument("--local_rank", "--local-rank", dest="local_rank", default=None)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    options = parse(sys.argv[1:] if argv is None else argv)
    if options.guard is not None:
        settings = json.loads(options.guard.read_text())
        sys.addaudithook(Guard(settings["work"], settings["protected"]))
    rank = int(os.environ.get("RANK", os.environ.get("HOROVOD_RANK", "0")))  # torchrun's, or horovodrun's
    options.record.mkdir(parents=True, exist_ok=True)
    stacks = open(options.record / f"rank{rank}.stack", "w")  # noqa: SIM115
    faulthandler.dump_traceback_later(options.timeout, exit=True, file=stacks)
    faulthandler.register(signal.SIGTERM, file=stacks, all_threads=True, chain=True)
    recorder = Recorder(options.record, rank, options.root)
    output = writes.install(recorder)
    recorder.event("start", rank=rank, root=recorder.root, pid=os.getpid(), to_end=options.to_end,
                   world_size=int(os.environ.get("WORLD_SIZE", os.environ.get("HOROVOD_SIZE", "1"))))
    compare = options.compare_batch_scale > 0
    probe = Probe(recorder, options.steps, to_end=options.to_end)
    install_training_hooks(probe)
    if compare:
        install_compare_hooks(options.compare_batch_scale)
    install_save_hook(recorder)
    if options.fake_data:
        from migrate.verify.fake_data import install_fake_datasets

        recorder.event("fake_data", datasets=install_fake_datasets())
    if options.pretend_gpu:
        from migrate.verify import pretend_gpu

        pretend_gpu.install()
        recorder.event("pretend_gpu", devices=pretend_gpu.STATE.count)
    status = run_script(options, recorder, probe)
    if compare and status == 0:
        try:
            probe.save_weights(options.record / "weights.pt", rank)
        except Exception as error:  # noqa: BLE001 (a script that destroyed its process group at its end)
            recorder.event("weights", error=str(error)[:MAX_TEXT])
    faulthandler.cancel_dump_traceback_later()
    output.finish()
    os._exit(status)  # no interpreter teardown: the script's process group may still be alive


def run_script(options: argparse.Namespace, recorder: Recorder, probe: Probe) -> int:
    """Run the script as `__main__` with its arguments; record how it ended; its exit status."""
    script = str(Path(options.script).resolve())
    launcher_args = [f"--local_rank={options.local_rank}"] if options.local_rank is not None else []
    sys.argv = [script, *launcher_args, *options.args]  # where the deepspeed launcher puts it
    sys.path.insert(0, os.path.dirname(script))
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
            return 1
    except BaseException as error:  # noqa: BLE001 (everything the script raises is what verify reports)
        where = _where_in(error, recorder.root)
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
        recorder.event("end", outcome="error", steps=probe.total, error=text[-MAX_TEXT * 3:], where=where)
        traceback.print_exc()
        return 1
    return 0


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
