"""Hand-written reductions a gather makes redundant (MIG031): a metric accumulated from
gathered tensors is whole on every process, so `dist.all_reduce(t)` of it (or of a tensor
built from it, `stats = torch.tensor([correct, seen])`) would count it N times; it goes, with
the division by the world size that turned the sum into a mean (`t /= world_size`)."""

from __future__ import annotations

import ast

from migrator.analysis.distributed.facts import NUM_PROCESSES
from migrator.analysis.syntax.index import Scope
from migrator.rules.base import RuleContext


def drop_hand_reductions(context: RuleContext, scope: Scope, metrics: set[str]) -> None:
    """`dist.all_reduce(t)` of a gathered metric, or of a tensor built from one, goes (MIG010
    would make it `accelerator.reduce`), with `t /= world_size` after it."""
    metrics = {m for m in metrics if m}
    grew = True
    while grew:  # names computed from metrics, in this function
        grew = False
        for name, bindings in scope.bindings.items():
            if name not in metrics and any(
                b.value is not None and set(_names_in(b.value)) & metrics for b in bindings
            ):
                metrics.add(name)
                grew = True
    for reduction in context.facts.distributed.reductions:
        if (
            reduction.tensor in metrics
            and reduction.site.scope is scope
            and reduction.site.small is not None
        ):
            context.edits.remove(reduction.site.small)
            _drop_world_size_division(context, scope, reduction.tensor)


def _drop_world_size_division(context: RuleContext, scope: Scope, tensor: str) -> None:
    for binding in scope.bindings.get(tensor, []):
        small = binding.small
        if (
            isinstance(small, ast.AugAssign)
            and isinstance(small.op, ast.Div)
            and _is_world_size(context, scope, small.value)
        ):
            context.edits.remove(small)


def _is_world_size(context: RuleContext, scope: Scope, expr: ast.expr) -> bool:
    """A name holding the world size, or a `dist.get_world_size()` call (MIG010's facts)."""
    facts = context.facts
    if isinstance(expr, ast.Name):
        return facts.rank_kind(scope, expr.id) == NUM_PROCESSES
    return any(site.node is expr and kind == NUM_PROCESSES
               for site, kind in facts.distributed.rank_calls)  # fmt: skip


def _names_in(expr: ast.AST) -> list[str]:
    return [node.id for node in ast.walk(expr) if isinstance(node, ast.Name)]
