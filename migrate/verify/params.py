"""Digests of tensors and of a model's parameters, for the runner (runner.py) inside each rank.

- `digest`: a short sha1 of tensors' shapes, dtypes and bytes (an input, a parameter). A sparse
  tensor is digested by its coalesced indices and values, another layout (CSR, nested) densified;
  a tensor that cannot be read gives None (nothing to compare), never an error of the script's.
- `parameter_digests`: {parameter name: digest} of a model's *full* parameters on every rank:
  FSDP2's DTensors are gathered with `full_tensor()`, DeepSpeed ZeRO-3's partitioned parameters
  inside `deepspeed.zero.GatheredParameters`. Both are collectives: every rank must call it at the
  same point, for the same models, in the same order (the runner does so at the first top-level
  forward after a step). Names are the user's: the prefixes of wrappers (`module.`,
  `_fsdp_wrapped_module.`, `_orig_mod.`, `_checkpoint_wrapped_module.`) are removed.
- `local_signature`: a cheap fingerprint of the trainable parameters this rank holds (no
  collective): {id of the parameter: a digest of a strided sample of at most SAMPLE of its values}
  (values, not version counters: `p.data -= ...` bumps no counter, and FSDP2 bumps them when it
  gathers). `changed` compares two of them on the parameters both hold: FSDP2 swaps a module's
  sharded parameters for gathered ones during its forward, which is no update.

Digests copy a tensor's bytes before reading them: a numpy view would mark the storage as not
resizable, and FSDP2 resizes the storage of the parameters it gathers.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any

SAMPLE = 4096  # values per parameter in local_signature
WRAPPER_PREFIXES = ("module.", "_fsdp_wrapped_module.", "_orig_mod.", "_checkpoint_wrapped_module.")


def digest(tensors: list[Any]) -> str | None:
    """sha1 (16 hex digits) of the tensors; None when one cannot be read as bytes."""
    import torch

    hasher = hashlib.sha1()
    try:
        for tensor in tensors:
            for part in _dense_parts(tensor.detach()):
                data = part.cpu().contiguous()
                hasher.update(str((tuple(data.shape), str(data.dtype))).encode())
                if data.numel():  # a copy: numpy() would pin the storage FSDP resizes
                    hasher.update(data.view(-1).view(torch.uint8).clone().numpy().tobytes())
    except Exception:  # noqa: BLE001 (a quantized, meta or exotic tensor: nothing to compare)
        return None
    return hasher.hexdigest()[:16]


def _dense_parts(tensor: Any) -> list[Any]:
    import torch

    if tensor.layout == torch.sparse_coo:
        coalesced = tensor.coalesce()
        return [coalesced.indices(), coalesced.values()]
    if tensor.layout != torch.strided:
        return [tensor.to_dense()]
    return [tensor]


def is_sharded(tensor: Any) -> bool:
    """A DTensor (FSDP2's parameters and state dict entries)."""
    return type(tensor).__name__ == "DTensor" and hasattr(tensor, "full_tensor")


def is_partitioned(tensor: Any) -> bool:
    """A DeepSpeed ZeRO-3 parameter (each rank holds its own partition)."""
    return hasattr(tensor, "ds_id")


def whole(tensor: Any) -> Any:
    """The full tensor: a DTensor's shards gathered from every rank (a collective)."""
    return tensor.full_tensor() if is_sharded(tensor) else tensor


def clean_name(name: str) -> str:
    """A parameter's name without the prefixes wrappers add."""
    parts = [part for part in name.split(".") if f"{part}." not in WRAPPER_PREFIXES]
    return ".".join(parts)


@contextlib.contextmanager
def full_parameters(module: Any) -> Iterator[list[tuple[str, Any]]]:
    """(the user's name, the full tensor) of each parameter of `module`; gathered from every rank
    where sharded (a collective)."""
    named = list(module.named_parameters())
    partitioned = [p for _, p in named if is_partitioned(p)]
    with _gathered(partitioned):
        yield [(clean_name(name), whole(p.detach())) for name, p in named]


def gathered(module: Any) -> contextlib.AbstractContextManager[None]:
    """Inside it, ZeRO-3's partitioned parameters of `module` are whole on every rank (a collective)."""
    return _gathered([p for p in module.parameters() if is_partitioned(p)])


@contextlib.contextmanager
def _gathered(partitioned: list[Any]) -> Iterator[None]:
    if not partitioned:
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(partitioned, modifier_rank=None):
        yield


def parameter_digests(module: Any) -> dict[str, str | None]:
    """{name: digest} of the full parameters of `module` (a collective where they are sharded)."""
    with full_parameters(module) as named:
        return {name: digest([tensor]) for name, tensor in named}


def combined(digests: dict[str, str | None]) -> str:
    """One digest for a model, from its parameters' digests."""
    return hashlib.sha1(repr(sorted(digests.items())).encode()).hexdigest()[:16]


def local_signature(modules: list[Any]) -> dict[int, str | None]:
    """A fingerprint of the trainable parameters of `modules` this rank holds (see the module docstring)."""
    import torch

    signature: dict[int, str | None] = {}
    with torch.no_grad():
        for module in modules:
            for parameter in module.parameters():
                if parameter.requires_grad:
                    signature[id(parameter)] = _sample(_local(parameter))
    return signature


def changed(before: dict[int, str | None], after: dict[int, str | None]) -> bool:
    """Whether a parameter held in both fingerprints changed."""
    return any(key in before and before[key] != value for key, value in after.items())


def _local(parameter: Any) -> Any:
    if is_sharded(parameter):
        return parameter.to_local()
    if is_partitioned(parameter) and hasattr(parameter, "ds_tensor"):
        return parameter.ds_tensor
    return parameter


def _sample(tensor: Any) -> str | None:
    flat = tensor.detach().reshape(-1)
    step = max(1, flat.numel() // SAMPLE)
    return digest([flat[::step]])
