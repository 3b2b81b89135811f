"""Big scripts of the shapes benchmarks/scale.py times: each converts in full, and the analysis
holds up where a naive one would recurse once per function in a call chain. No timings here:
the benchmark prints those.

Also checks the index's shortcut for the calls under a statement against a plain walk.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import libcst as cst
import pytest

from migrate import migrate_source
from migrate.analysis.index import build_index
from migrate.analysis.syntax import calls_in

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted((ROOT / "tests" / "cases").glob("*/input.py"))


def _scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scale_benchmark", ROOT / "benchmarks" / "scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCALE = _scale()


@pytest.mark.parametrize("shape", sorted(SCALE.SHAPES))
def test_each_shape_converts_in_full(shape: str) -> None:
    result = migrate_source(SCALE.script(shape, 2000), "ddp", path=f"{shape}.py")
    assert not result.skipped and not result.error
    assert result.new != result.old
    assert "init_process_group" in result.new


def test_a_call_chain_deeper_than_the_recursion_limit_converts() -> None:
    code = SCALE.script("chain", 9 * sys.getrecursionlimit())  # 6 lines a function: 1.5 functions per frame allowed
    result = migrate_source(code, "ddp", path="chain.py")
    assert not result.skipped and not result.error
    assert "init_process_group" in result.new


def test_a_training_function_that_calls_itself_converts() -> None:
    """The epoch loop is looked for in the callers of the step loop's function: a function that
    calls itself (outside any loop) is searched once, not forever."""
    code = '''import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def run_epoch(model, optimizer, loader):
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


def train(model, optimizer, loader, epochs):
    if epochs == 0:
        return
    run_epoch(model, optimizer, loader)
    train(model, optimizer, loader, epochs - 1)


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8, shuffle=True)
    model = nn.Linear(8, 1)
    train(model, torch.optim.SGD(model.parameters(), lr=0.1), loader, 3)


if __name__ == "__main__":
    main()
'''
    result = migrate_source(code, "ddp")
    assert not result.error


@pytest.mark.parametrize("source", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_calls_under_a_statement_are_those_a_walk_finds(source: Path) -> None:
    index = build_index(cst.parse_module(source.read_text()))
    for stmt in index.scope_of:
        walked, indexed = calls_in(stmt), index.calls_under(stmt)
        assert len(walked) == len(indexed) and all(a is b for a, b in zip(walked, indexed))
