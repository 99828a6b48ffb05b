"""Tidying an `if` chain some of whose branches the edits emptied, the way a person would
write it: an emptied `else:` (or trailing `elif c:` whose test does nothing) goes while another
branch keeps statements; `if c: pass` / `else: body` becomes `if not c: body` (an emptied
`elif c:` right before the `else:` likewise becomes `elif not c:`; one in front of another
`elif` keeps its `pass`, since dropping it would change which branch runs). Only branches left
with `pass` and nothing else are touched: a comment that stayed in one keeps the `pass`. A
chain whose branches all emptied is the renderer's business (kept, or dropped when asked).
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.distributed.reader import is_pure
from migrator.analysis.syntax.index import Block

FLIPPED = {ast.In: "not in", ast.NotIn: "in", ast.Is: "is not", ast.IsNot: "is",
           ast.Eq: "!=", ast.NotEq: "=="}  # fmt: skip
SPELLED = {ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
           ast.Eq: "==", ast.NotEq: "!="}  # fmt: skip
ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)


def tidy_if(renderer, node: ast.If, start: int, end: int) -> str | None:
    """The `if` statement's text (offsets `start`..`end`) with its emptied branches tidied, or
    None where there is nothing to tidy."""
    edits, index = renderer.edits, renderer.index
    clauses = [node]
    while len(orelse := clauses[-1].orelse) == 1 and isinstance(orelse[0], ast.If):
        if not renderer.layout.is_elif(orelse[0]):
            break
        clauses.append(orelse[0])
    blocks = [index.block(clause, "body") for clause in clauses]
    if clauses[-1].orelse:
        blocks.append(index.block(clauses[-1], "orelse"))
    if any(block is None or block.kind != "body" for block in blocks) or any(
        id(clause) in edits.replacements or id(clause) in edits.rewrites for clause in clauses
    ):
        return None
    spans = [_span(renderer, block) for block in blocks]
    bare = [_bare(renderer, block, span) for block, span in zip(blocks, spans)]
    if all(bare) or not any(bare):
        return None
    kept = len(blocks)  # branches left, in order
    has_else = kept > len(clauses)
    if has_else and bare[-1]:  # `else: pass` goes
        kept, has_else = kept - 1, False
    while (
        not has_else
        and kept > 1
        and bare[kept - 1]
        and quiet(clauses[kept - 1].test, index.imports)
    ):
        kept -= 1  # a trailing `elif c: pass` goes
    text = renderer.span_text
    last_test = clauses[kept - 2].test if has_else and kept > 1 else None
    gap = (
        renderer.source.text[spans[kept - 2][1] : spans[kept - 1][0]]
        if last_test is not None
        else ""
    )
    if last_test is not None and bare[kept - 2] and "#" not in gap:
        test_start, test_end = renderer.expression_span(last_test, parens=True)
        pieces = [text(start, test_start), negated(text(test_start, test_end)),
                  text(test_end, spans[kept - 2][0]), text(*spans[kept - 1])]  # fmt: skip
    elif kept == len(blocks):
        return None
    else:
        pieces = [text(start, spans[kept - 1][1])]
    return "".join(pieces) + text(spans[-1][1], end)


def branches_emptied(renderer, node) -> bool:
    """Did the edits empty every branch of the compound statement (`pass` in each)?"""
    index = renderer.index
    body = index.block(node, "body")
    if body is None or id(body) not in renderer.emptied:
        return False
    orelse = None
    if isinstance(node, ast.If) and node.orelse:
        first = node.orelse[0]
        if len(node.orelse) == 1 and isinstance(first, ast.If) and renderer.layout.is_elif(first):
            orelse = index.block(first, "body")
        else:
            orelse = index.block(node, "orelse")
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)) or hasattr(node, "handlers"):
        orelse = index.block(node, "orelse")
    return orelse is None or id(orelse) in renderer.emptied


def negated(code: str) -> str:
    """The condition that holds where `code` does not, written simply: `a not in b` for
    `a in b`, `x is None` for `x is not None`, `!=` for `==`, `x` for `not x`, `not f(x)` for
    `f(x)`, `not (...)` for anything else."""
    stripped = code.strip()
    try:
        tree = ast.parse(stripped, mode="eval").body
    except SyntaxError:
        return f"not ({stripped})"
    wrapped = stripped.startswith("(") and tree.col_offset > 0
    if wrapped or isinstance(tree, ATOMS):
        return f"not {stripped}"
    if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not):
        operand = stripped[3:].lstrip(" \t")
        if stripped[3:4] in (" ", "(") and "\n" not in operand:
            return operand
    if isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in FLIPPED:
        left = _offset(stripped, tree.left.end_lineno, tree.left.end_col_offset)
        right = _offset(stripped, tree.comparators[0].lineno, tree.comparators[0].col_offset)
        between = stripped[left:right]
        spelled = SPELLED[type(tree.ops[0])]
        pattern = (
            r"\b" + r"\s+".join(spelled.split()) + r"\b"
            if spelled[0].isalpha()
            else re.escape(spelled)
        )
        found = list(re.finditer(pattern, between))
        if len(found) == 1:
            match = found[0]
            flipped = FLIPPED[type(tree.ops[0])]
            return stripped[: left + match.start()] + flipped + stripped[left + match.end() :]
    return f"not ({stripped})"


def _offset(text: str, line: int, column: int) -> int:
    """The character offset of an AST position (`column` counts UTF-8 bytes)."""
    lines = text.splitlines(keepends=True)
    before = sum(len(entry) for entry in lines[: line - 1])
    return before + len(lines[line - 1].encode()[:column].decode())


def _span(renderer, block: Block) -> tuple[int, int]:
    layout = renderer.block_layout(block)
    return layout.start, layout.end


def _bare(renderer, block: Block, span: tuple[int, int]) -> bool:
    """Was the block emptied, with no comment left in it?"""
    return id(block) in renderer.emptied and renderer.span_text(*span).strip() == "pass"


def quiet(test: ast.expr, imports) -> bool:
    """Can the test go without anything else changing (no call, walrus, await or yield)?"""
    return is_pure(test, imports) and not any(
        isinstance(node, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom))
        for node in ast.walk(test)
    )
