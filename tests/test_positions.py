"""Finding positions agree with libcst's own position metadata."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from migrate.analysis.index import descendants
from migrate.analysis.positions import Positions

SCRIPTS = sorted(Path(__file__).parent.glob("cases/*/input.py")) + sorted(Path(__file__).parents[1].glob("samples/*/train.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_positions_match_libcst_metadata(script: Path) -> None:
    code = script.read_text()
    module = cst.parse_module(code)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    positions = Positions(module, code)
    checked = 0
    for node in descendants(module):
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Call, cst.For)):
            start = expected[node].start
            assert positions.of(node) == (start.line, start.column + 1), cst.Module([]).code_for_node(node)[:60]
            checked += 1
    assert checked > 10
