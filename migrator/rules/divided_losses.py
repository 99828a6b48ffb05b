"""MIG022's other readers of a divided loss. `loss = loss / k` (or `loss /= k`) goes when the
loop accumulates through `accelerator.accumulate` (accelerator.backward divides), but the
original also read the divided loss elsewhere - a running sum for the log (`avg_loss +=
loss.item()`), a print - and those reads must still see `loss / k`: each becomes `(loss / k)`.
Reads after the name is bound again, and the backward's own, are left as they are."""

from __future__ import annotations

import ast

from migrator.analysis.syntax.index import Loop
from migrator.rules.base import RuleContext


def keep_divided_reads(context: RuleContext, loop: Loop, division: ast.stmt, k: str) -> None:
    """`division` (`loss = loss / k`, `loss /= k`) is removed: the later reads of its name in
    the loop, but the backward's, read `(loss / k)`."""
    target = division.target if isinstance(division, ast.AugAssign) else division.targets[0]
    if not isinstance(target, ast.Name):
        return
    name, after = target.id, (division.end_lineno, division.end_col_offset)
    backward = {
        id(node)
        for site in context.facts.backward_calls
        if loop.contains(site.loop) and site.receiver is not None
        for node in ast.walk(site.receiver)
    }
    rebound = [  # the statements binding the name again: reads after them read the new value
        (statement.end_lineno, statement.end_col_offset)
        for statement in ast.walk(loop.node)
        if isinstance(statement, ast.stmt) and statement is not division
        and any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                for n in _targets(statement))
        and (statement.lineno, statement.col_offset) > after
    ]  # fmt: skip
    until = min(rebound, default=(float("inf"), 0))
    for node in ast.walk(loop.node):
        if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)):
            continue
        where = (node.lineno, node.col_offset)
        if where <= after or where > until or id(node) in backward:
            continue
        context.edits.replace(node, lambda text, _renderer, k=k: f"({text} / {k})")


def _targets(statement: ast.stmt) -> list[ast.AST]:
    """The nodes a statement binds (not those of statements nested in it)."""
    if isinstance(statement, ast.Assign):
        return [n for t in statement.targets for n in ast.walk(t)]
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        return list(ast.walk(statement.target))
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [n for item in statement.items if item.optional_vars
                for n in ast.walk(item.optional_vars)]  # fmt: skip
    return []
