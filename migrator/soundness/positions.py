"""Findings about the migrated text, put back on the lines of the input the user has: an
unchanged line maps to itself, an edited one to the input line the edit replaced (or, for an
inserted line, the next input line that is still there)."""

from __future__ import annotations

import ast
import re
from difflib import SequenceMatcher

from migrator.findings import Finding
from migrator.source import Source

LINE = re.compile(r"\bline (\d+)\b")


def on_input(findings: list[Finding], original: str, output: str) -> list[Finding]:
    """The findings on the input's lines, the lines their messages name too ("called at line
    212" of the input, not of the output)."""
    lines = _line_map(original.splitlines(), output.splitlines())
    out_source = Source(output)
    for finding in findings:
        finding.message = LINE.sub(
            lambda m: f"line {lines.get(int(m.group(1)), int(m.group(1)))}", finding.message
        )
        node = finding.node
        if node is None:
            continue
        finding.line = lines.get(node.lineno, node.lineno)
        finding.col = out_source.column(node) + 1
        finding.node = None
    return findings


def _line_map(before: list[str], after: list[str]) -> dict[int, int]:
    """1-based output line -> 1-based input line."""
    found: dict[int, int] = {}
    matcher = SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for offset, j in enumerate(range(j1, j2)):
            if tag == "equal":
                found[j + 1] = i1 + offset + 1
            elif i2 > i1:  # replaced: the input line at the same offset, or its last one
                found[j + 1] = min(i1 + offset, i2 - 1) + 1
            else:  # inserted: the next input line
                found[j + 1] = min(i1 + 1, max(len(before), 1))
    return found


def answered(findings: list[Finding], tree: ast.Module, sums, original: str, output: str):
    """The findings, less the MIG031 warnings that MIG032 answered: a warning on `total +=
    ...` in a loop ("counts only this process's batches", "gather by hand") where MIG032,
    on the migrated text, reduced `total` over the processes after that loop (`sums`: the
    loop's lines in `output`, the name). Its numbers then count every process's batches."""
    if not sums:
        return findings
    lines = _line_map(original.splitlines(), output.splitlines())
    reduced = [(lines.get(a, a), lines.get(b, b), name) for a, b, name in sums]
    totals = [(n, name) for n in ast.walk(tree) if (name := _total(n))]
    kept = []
    for finding in findings:
        node = finding.node
        if finding.code == "MIG031" and finding.needs_human and node is not None:
            line = node.lineno
            names = {name for t, name in totals if t.lineno <= line <= t.end_lineno}
            if any(a <= line <= b and name in names for a, b, name in reduced):
                continue
        kept.append(finding)
    return kept


def _total(node: ast.AST) -> str | None:
    """The name a statement adds to: `total += x`, `total = total + x`."""
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.BinOp)
        and isinstance(node.value.left, ast.Name)
        and node.value.left.id == node.targets[0].id
    ):
        return node.targets[0].id
    return None
