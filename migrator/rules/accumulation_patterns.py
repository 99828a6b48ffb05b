"""Syntax of hand-written gradient accumulation, for MIG022. No facts, no edits.

The step condition `(i + 1) % k == 0` (or `!= 0` / a bare `(i + 1) % k` for "still
accumulating"), and the two ways DDP scripts skip the all-reduce on accumulating batches:

    if (i + 1) % k != 0:                       # branches: the same forward/backward twice,
        with model.no_sync():                  # once without sync, once followed by the step
            loss = ...; loss.backward()
    else:
        loss = ...; loss.backward()
        optimizer.step(); optimizer.zero_grad()

    with model.no_sync() if (i + 1) % k != 0 else nullcontext():   # a context, then the step
        loss = ...; loss.backward()            # also `ctx = model.no_sync if ... else
    if (i + 1) % k == 0: ...                   # nullcontext` followed by `with ctx():`
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrator.analysis.imports import ImportTable
from migrator.edits import CODEGEN


def code_of(node: cst.CSTNode) -> str:
    """A node's code without whitespace, for comparing expressions and statements."""
    return "".join(CODEGEN.code_for_node(node).split())


def modulo_test(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool] | None:
    """(k, steps_when_true) for `(i + 1) % k == 0` (True), `(i + 1) % k != 0` and the bare
    `(i + 1) % k` (False); `A or B` steps when either does (`... or i == len(loader) - 1`)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        for side in (test.left, test.right):
            found = modulo_test(side)
            if found is not None and found[1]:
                return found
        return None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if code_of(target.comparator) != "0":
            return None
        k = _counter_modulo(test.left)
        if k is None:
            return None
        if isinstance(target.operator, cst.Equal):
            return k, True
        if isinstance(target.operator, cst.NotEqual):
            return k, False
        return None
    k = _counter_modulo(test)
    return (k, False) if k is not None else None


def _counter_modulo(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """k of `(i + 1) % k`."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        counter = node.left
        if (
            isinstance(counter, cst.BinaryOperation)
            and isinstance(counter.operator, cst.Add)
            and code_of(counter.right) == "1"
        ):
            return node.right
    return None


@dataclass(eq=False)
class NoSyncBranches:
    """The `if`/`else` form: `accumulating` is the no_sync `with` body, `syncing` the other
    branch, whose first statements repeat it and whose rest (`step`) is the optimizer step."""

    node: cst.If
    k: cst.BaseExpression
    model: cst.BaseExpression
    steps_when_true: bool  # the syncing branch is the `if` body (else the `else` body)


def no_sync_branches(node: cst.If) -> NoSyncBranches | None:
    found = modulo_test(node.test)
    if found is None:
        return None
    k, steps_when_true = found
    split = split_branches(node, steps_when_true)
    if split is None:
        return None
    inner, rest = split
    model = no_sync_receiver(inner.items[0].item) if len(inner.items) == 1 else None
    if model is None:
        return None
    repeated = list(inner.body.body)
    if len(rest) <= len(repeated):
        return None
    if [code_of(s) for s in rest[: len(repeated)]] != [code_of(s) for s in repeated]:
        return None
    return NoSyncBranches(node, k, model, steps_when_true)


def split_branches(node: cst.If, steps_when_true: bool):
    """(the `with` that is the whole accumulating branch, the syncing branch's statements) of
    an `if`/`else` (original or rewritten), or None."""
    bodies = (node.body, node.orelse.body) if isinstance(node.orelse, cst.Else) else None
    if bodies is None or not all(isinstance(b, cst.IndentedBlock) for b in bodies):
        return None
    accumulating, syncing = (bodies[1], bodies[0]) if steps_when_true else bodies
    inner = accumulating.body[0] if len(accumulating.body) == 1 else None
    if not isinstance(inner, cst.With) or not isinstance(inner.body, cst.IndentedBlock):
        return None
    return inner, list(syncing.body)


def no_sync_receiver(expr: cst.BaseExpression, called: bool = True):
    """`model` of `model.no_sync()` (or of `model.no_sync` when `called` is False)."""
    if called:
        if not isinstance(expr, cst.Call) or expr.args:
            return None
        expr = expr.func
    if isinstance(expr, cst.Attribute) and expr.attr.value == "no_sync":
        return expr.value
    return None


def conditional_no_sync(expr: cst.BaseExpression, imports: ImportTable, called: bool = True):
    """(model, k) of `model.no_sync() if <accumulating> else nullcontext()` (either order;
    with `called` False, the uncalled `model.no_sync if ... else nullcontext`)."""
    if not isinstance(expr, cst.IfExp):
        return None
    found = modulo_test(expr.test)
    if found is None:
        return None
    k, steps_when_true = found
    no_sync, other = (expr.orelse, expr.body) if steps_when_true else (expr.body, expr.orelse)
    model = no_sync_receiver(no_sync, called)
    if model is None:
        return None
    null = other
    if called:
        if not isinstance(other, cst.Call) or other.args:
            return None
        null = other.func
    if imports.qualify(null) != "contextlib.nullcontext":
        return None
    return model, k
