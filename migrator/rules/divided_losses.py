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
    binders = [  # a simple statement, or the `for`/`with` that binds it
        binding.small if binding.small is not None else binding.statement.node
        for binding in loop.scope.bindings.get(name, [])
        if loop.contains(binding.loop)
    ]
    rebound = [  # the statements binding the name again: reads after them read the new value
        (node.end_lineno, node.end_col_offset)
        for node in binders
        if node is not division and (node.lineno, node.col_offset) > after
    ]
    until = min(rebound, default=(float("inf"), 0))
    for node in ast.walk(loop.node):
        if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)):
            continue
        where = (node.lineno, node.col_offset)
        if where <= after or where > until or id(node) in backward:
            continue
        context.edits.replace(node, lambda text, _renderer, k=k: f"({text} / {k})")
