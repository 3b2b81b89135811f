"""Finds the places that name a device: `torch.device("cuda")`, `device = 0`, `"cuda:0"`,
`.cuda()`, `.to(0)`. Each becomes the local rank's device (or the CPU without CUDA).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import Binding, CallSite, ScriptIndex, spell
from migrate.analysis.training import contains

DEVICE_WORDS = ("device", "gpu", "cuda")


def is_cuda_literal(node: cst.CSTNode) -> bool:
    """"cuda", "cuda:0" (any index)."""
    if not isinstance(node, cst.SimpleString):
        return False
    value = node.evaluated_value
    return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))


def is_int_literal(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Integer)


def device_bindings(index: ScriptIndex) -> list[Binding]:
    """`device = ...` (or `gpu_id`, ...) whose value names CUDA by a literal, or is `0`."""
    found: list[Binding] = []
    for binding in index.bindings:
        name = binding.target.split(".")[-1].lower()
        if binding.value is None or not any(word in name for word in DEVICE_WORDS):
            continue
        value = binding.value
        if is_int_literal(value) or contains(value, is_cuda_literal) or _conditional_int(value):
            found.append(binding)
    return found


def _conditional_int(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.IfExp) and (is_int_literal(value.body) or is_int_literal(value.orelse))


def torch_device_calls(index: ScriptIndex) -> list[CallSite]:
    """`torch.device(...)` calls naming CUDA by a literal, outside device bindings too."""
    return [c for c in index.calls_named("torch.device") if contains(c.node, is_cuda_literal)]


def cuda_method_calls(index: ScriptIndex) -> list[CallSite]:
    """`x.cuda()`, `x.cuda(0)`, `x.cuda(gpu)` on any value (not `torch.cuda.*` functions)."""
    return [
        c
        for c in index.calls
        if isinstance(c.node.func, cst.Attribute)
        and c.node.func.attr.value == "cuda"
        and spell(c.node.func.value) != "torch"
    ]


def to_int_calls(index: ScriptIndex) -> list[CallSite]:
    """`x.to(0)`: a device index literal."""
    return [
        c
        for c in index.calls
        if isinstance(c.node.func, cst.Attribute)
        and c.node.func.attr.value == "to"
        and c.node.args
        and c.node.args[0].keyword is None
        and is_int_literal(c.node.args[0].value)
    ]
