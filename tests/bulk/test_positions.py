"""Positions: `ast` gives UTF-8 byte columns; spans and finding columns are in characters."""

from __future__ import annotations

import ast

import pytest
from bulk_support import REPO, TRAIN_SCRIPT

from migrator.engine import migrate_bytes, migrate_text
from migrator.source import Source
from tests.fixtures import without_batch_note

TRICKY = (
    "import torch\r\n"
    "def f(a,\r\n      b):\r\n"
    "\tx = '''multi\r\nline''' ; y = (a +\r\n  b)\r\n"
    "\t@decorator\r\n\tdef g(): return [i for i in range(3)]\r\n"
    "\tloss.backward()\r\n"
)
NON_ASCII = (
    "# -*- coding: utf-8 -*-\n"
    "naïve = 'éé'; ünits = {'µ': 1e-6}  # ✓\n"
    "def lösung(x):\n    return f'{x}→{naïve}'\n"
    "y = lösung(ünits['µ']) + len('日本語')\n"
)


def _nodes(tree: ast.AST) -> list[ast.AST]:
    return [n for n in ast.walk(tree) if getattr(n, "end_col_offset", None) is not None]


@pytest.mark.parametrize("text", [TRAIN_SCRIPT, TRICKY, NON_ASCII, "x = 1", "a = 1\rb = 'ß'\r"])
def test_every_span_equals_cpythons_source_segment(text):
    source = Source(text)
    for node in _nodes(ast.parse(text)):
        assert source.segment(node) == ast.get_source_segment(text, node), ast.dump(node)


@pytest.mark.parametrize(
    ("code", "inner", "own"),
    [
        ("y = (a + b) * c", "a + b", "(a + b)"),
        ("y = f(x)", "x", "x"),
        ("y = f((x))", "x", "(x)"),
        ("y = ( ( x ) ).z", "x", "( ( x ) )"),
        ("def f():\n    return (x)", "x", "(x)"),
        ("class A(B): pass", "B", "B"),
        ("y = print (x)", "x", "x"),
        ("y = not (x)", "x", "(x)"),
        ("y = f(x)(z)", "z", "z"),
        ("y = [(x)]", "x", "(x)"),
    ],
)
def test_own_parentheses_belong_to_the_node_and_never_to_a_call(code, inner, own):
    source = Source(code)
    (node,) = [n for n in _nodes(ast.parse(code)) if source.segment(n) == inner]
    assert source.text_of(node) == own


def test_finding_columns_count_characters_on_non_ascii_lines():
    text = "def f(lösung, o):\n    é = 1; lösung.backward()\n    o.step()\n"
    result = migrate_bytes(text.encode(), "f.py")
    (note,) = result.findings
    assert (note.code, note.line) == ("MIG905", 2)
    assert note.col == text.splitlines()[1].index("lösung.backward") + 1


def test_analysis_finding_columns_count_characters():
    line = next(line for line in TRAIN_SCRIPT.splitlines() if "loss.backward()" in line)
    indent = line[: len(line) - len(line.lstrip())]
    text = TRAIN_SCRIPT.replace(line, f"{indent}ü = 'é'; x = torch.ones(1).cuda(1)\n{line}", 1)
    _, findings = migrate_text(text)
    (index,) = [f for f in findings if f.code == "MIG902"]
    line = text.splitlines()[index.line - 1]
    assert index.col == line.index("torch.ones(1).cuda(1)") + 1


def test_a_finding_on_a_line_of_statements_starts_at_its_first_one():
    example = (REPO / "examples" / "train.py").read_text()
    text = example.replace("    scheduler = StepLR(", "    pass; scheduler = StepLR(", 1)
    assert text != example
    _, findings = migrate_text(text)
    (note,) = [f for f in without_batch_note(findings) if f.code == "MIG006"]
    line = text.splitlines()[note.line - 1]
    assert line.startswith("    pass; scheduler") and note.col == 5
