"""Finding positions from the cheap code-generation pass equal LibCST's PositionProvider."""

from __future__ import annotations

import libcst as cst
import pytest
from bulk_support import TRAIN_SCRIPT
from libcst.metadata import MetadataWrapper, PositionProvider

from migrator.positions import start_positions

TRICKY = (
    "import torch\r\n"
    "def f(a,\r\n      b):\r\n"
    "\tx = '''multi\r\nline''' ; y = (a +\r\n  b)\r\n"
    "\t@decorator\r\n\tdef g(): return [i for i in range(3)]\r\n"
    "\tloss.backward()\r\n"
)


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    nodes = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    module.visit(Collect())
    return nodes


@pytest.mark.parametrize("source", [TRAIN_SCRIPT, TRICKY, "", "x = 1", "\n\n# only a comment\n"])
def test_start_positions_match_position_provider_for_every_node(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _all_nodes(module)
    ours = start_positions(module, nodes)
    for node in nodes:
        if node in expected:
            start = expected[node].start
            assert ours[id(node)] == (start.line, start.column), type(node).__name__


def test_start_positions_of_a_few_nodes():
    module = cst.parse_module(TRAIN_SCRIPT)
    calls = [
        n
        for n in _all_nodes(module)
        if isinstance(n, cst.Call)
        and isinstance(n.func, cst.Attribute)
        and n.func.attr.value == "backward"
    ]
    ((line, column),) = start_positions(module, calls).values()
    assert TRAIN_SCRIPT.splitlines()[line - 1][column:].startswith("loss.backward()")
