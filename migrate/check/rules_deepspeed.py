"""Check rule for DeepSpeed configs (DC701): the batch arithmetic DeepSpeed enforces at start-up,
train_batch_size == train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size,
checked where the numbers are literals: in a dict literal of the script, or in a JSON file beside
it that the script names. The world size is not known before a launch, so what is checked is that
some world size can make it hold (train_batch_size divisible by the rest)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

import libcst as cst

from migrate.analysis.index import descendants
from migrate.check.facts import Hit, Script
from migrate.records import InputError
from migrate.sources import read_regular_file

KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
MAX_CONFIG_BYTES = 1024 * 1024


def batch_arithmetic(script: Script) -> Iterator[Hit]:
    """DC701, for dict literals and for the JSON files the script names."""
    for node in descendants(script.module):
        if isinstance(node, cst.Dict):
            problem = impossible(_literal_numbers(node))
            if problem is not None:
                yield Hit(node, problem)
    for path in _named_configs(script):
        yield from _json_config(path)


def impossible(numbers: dict[str, int]) -> str | None:
    """Why no world size satisfies the config's numbers (None: some does, or too few are known)."""
    total = numbers.get("train_batch_size")
    micro, steps = numbers.get("train_micro_batch_size_per_gpu"), numbers.get("gradient_accumulation_steps")
    if total is None or (micro is None and steps is None):
        return None
    per_rank = (micro or 1) * (steps or 1)
    if per_rank > 0 and total > 0 and total % per_rank == 0:
        return None
    parts = " x ".join(f"{key} {numbers[key]}" for key in KEYS[1:] if key in numbers)
    return (f"train_batch_size {total} is not {parts} x the world size for any world size ({total} is not a "
            f"multiple of {per_rank}): DeepSpeed refuses to start; make train_batch_size = micro x accumulation x ranks")


def _literal_numbers(node: cst.Dict) -> dict[str, int]:
    numbers: dict[str, int] = {}
    for element in node.elements:
        if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                and element.key.evaluated_value in KEYS and isinstance(element.value, cst.Integer):
            numbers[str(element.key.evaluated_value)] = int(element.value.value, 0)
    return numbers


def _named_configs(script: Script) -> list[str]:
    """JSON files beside the script (or below its folder) that a string of the script names."""
    folder = os.path.dirname(script.path)
    found: list[str] = []
    for node in descendants(script.module):
        if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
            name = node.evaluated_value
            if name.endswith(".json") and not os.path.isabs(name) and "\n" not in name:
                path = os.path.join(folder, name)
                if path not in found and os.path.isfile(path):
                    found.append(path)
    return found


def _json_config(path: str) -> Iterator[Hit]:
    try:
        text = read_regular_file(path, MAX_CONFIG_BYTES).decode("utf-8")
        config = json.loads(text)
    except (InputError, ValueError):  # not a config that can be read (or not JSON): nothing to check
        return
    if not isinstance(config, dict):
        return
    numbers = {key: config[key] for key in KEYS if type(config.get(key)) is int}
    problem = impossible(numbers)
    if problem is not None:
        line, col = _key_position(text, "train_batch_size")
        yield Hit(None, problem, (path, line, col))


def _key_position(text: str, key: str) -> tuple[int, int]:
    match = re.search(rf'"{key}"', text)
    if match is None:
        return (1, 1)
    line = text.count("\n", 0, match.start()) + 1
    return line, match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
