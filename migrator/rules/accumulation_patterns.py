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

import ast
from dataclasses import dataclass

from migrator.analysis.syntax.imports import ImportTable
from migrator.analysis.syntax.index import Block, ModuleIndex
from migrator.layout import Layout
from migrator.source import Source


def code_of(source: Source, node: ast.AST) -> str:
    """An expression's code without whitespace, for comparing expressions."""
    return "".join(source.text_of(node).split())


def statement_codes(source: Source, block: Block) -> list[str]:
    """The code of each statement of a block without whitespace, comments above it included."""
    layout = Layout(source).block(block)
    codes = []
    for statement in layout.statements:
        text = "".join(line.text for line in statement.leading)
        text += source.text[
            source.line_starts[statement.first_line - 1] : source.line_end(statement.last_line)
        ]
        codes.append("".join(text.split()))
    return codes


def modulo_test(source: Source, test: ast.expr) -> tuple[ast.expr, bool] | None:
    """(k, steps_when_true) for `(i + 1) % k == 0` (True), `(i + 1) % k != 0` and the bare
    `(i + 1) % k` (False); `A or B` steps when either does (`... or i == len(loader) - 1`)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        for side in test.values:
            found = modulo_test(source, side)
            if found is not None and found[1]:
                return found
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        if code_of(source, test.comparators[0]) != "0":
            return None
        k = _counter_modulo(source, test.left)
        if k is None:
            return None
        if isinstance(test.ops[0], ast.Eq):
            return k, True
        if isinstance(test.ops[0], ast.NotEq):
            return k, False
        return None
    k = _counter_modulo(source, test)
    return (k, False) if k is not None else None


def _counter_modulo(source: Source, node: ast.expr) -> ast.expr | None:
    """k of `(i + 1) % k`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        counter = node.left
        if (
            isinstance(counter, ast.BinOp)
            and isinstance(counter.op, ast.Add)
            and code_of(source, counter.right) == "1"
        ):
            return node.right
    return None


@dataclass(eq=False)
class NoSyncBranches:
    """The `if`/`else` form: `accumulating` is the no_sync `with` body, `syncing` the other
    branch, whose first statements repeat it and whose rest (`step`) is the optimizer step."""

    node: ast.If
    k: ast.expr
    model: ast.expr
    steps_when_true: bool  # the syncing branch is the `if` body (else the `else` body)


def no_sync_branches(source: Source, index: ModuleIndex, node: ast.If) -> NoSyncBranches | None:
    found = modulo_test(source, node.test)
    if found is None:
        return None
    k, steps_when_true = found
    split = split_branches(source, index, node, steps_when_true)
    if split is None:
        return None
    inner, syncing = split
    model = no_sync_receiver(inner.items[0].context_expr) if len(inner.items) == 1 else None
    if model is None:
        return None
    repeated = statement_codes(source, index.block(inner))
    rest = statement_codes(source, syncing)
    if len(rest) <= len(repeated) or rest[: len(repeated)] != repeated:
        return None
    return NoSyncBranches(node, k, model, steps_when_true)


def split_branches(source: Source, index: ModuleIndex, node: ast.If, steps_when_true: bool):
    """(the `with` that is the whole accumulating branch, the syncing branch's block) of an
    `if`/`else`, or None."""
    if not node.orelse or (
        len(node.orelse) == 1
        and isinstance(node.orelse[0], ast.If)
        and source.text.startswith("elif", source.start(node.orelse[0]))
    ):
        return None
    bodies = (index.block(node, "body"), index.block(node, "orelse"))
    if not all(b is not None and b.kind == "body" for b in bodies):
        return None
    accumulating, syncing = (bodies[1], bodies[0]) if steps_when_true else bodies
    inner = accumulating.statements[0] if len(accumulating.statements) == 1 else None
    if not isinstance(inner, ast.With) or index.block(inner).kind != "body":
        return None
    return inner, syncing


def no_sync_receiver(expr: ast.expr, called: bool = True):
    """`model` of `model.no_sync()` (or of `model.no_sync` when `called` is False)."""
    if called:
        if not isinstance(expr, ast.Call) or expr.args or expr.keywords:
            return None
        expr = expr.func
    if isinstance(expr, ast.Attribute) and expr.attr == "no_sync":
        return expr.value
    return None


def conditional_no_sync(source: Source, expr: ast.expr, imports: ImportTable, called: bool = True):
    """(model, k) of `model.no_sync() if <accumulating> else nullcontext()` (either order;
    with `called` False, the uncalled `model.no_sync if ... else nullcontext`)."""
    if not isinstance(expr, ast.IfExp):
        return None
    found = modulo_test(source, expr.test)
    if found is None:
        return None
    k, steps_when_true = found
    no_sync, other = (expr.orelse, expr.body) if steps_when_true else (expr.body, expr.orelse)
    model = no_sync_receiver(no_sync, called)
    if model is None:
        return None
    null = other
    if called:
        if not isinstance(other, ast.Call) or other.args or other.keywords:
            return None
        null = other.func
    if imports.qualify(null) != "contextlib.nullcontext":
        return None
    return model, k
