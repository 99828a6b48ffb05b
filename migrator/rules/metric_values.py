"""MIG031's per-batch values that are not batch tensors: a Python number
(`psnr = 10 * log10(1 / mse.item())`) or a 0-d tensor per batch (`loss = criterion(out, y)`).
`gather_for_metrics` of either is wrong on N processes (a list of floats, or N values where
`.item()` wants one), so MIG031 all-reduces them, and these helpers tell what they are and
which reduction keeps the 1-process result.
"""

from __future__ import annotations

import ast

from migrator.analysis.index import Loop, Scope
from migrator.analysis.patterns import name_of
from migrator.rules.base import RuleContext


class PerBatchValues:
    """Which names of an eval loop hold a Python number or a 0-d tensor per batch."""

    def __init__(self, context: RuleContext) -> None:
        self.context = context
        self.numbers: set[str] = set()  # per-process names holding a Python number
        self.scalars: set[str] = set()  # per-process names holding a per-batch 0-d tensor

    def forget(self, names) -> None:
        self.numbers.difference_update(names)
        self.scalars.difference_update(names)

    def bind(self, names, value: ast.AST | None) -> None:
        """`names` were bound to `value`, which reads per-process data."""
        if self.is_number(value):
            self.numbers.update(names)
        elif self.is_scalar_tensor(value):
            self.scalars.update(names)

    def __contains__(self, name: str) -> bool:
        return name in self.numbers or name in self.scalars

    def is_scalar_tensor(self, expr: ast.AST | None) -> bool:
        """Does `expr` compute one tensor value per batch: a loss (`criterion(out, y)`,
        `F.mse_loss(...)`, `loss_fn(...)`), `x.mean()` / `x.sum()` without a dimension, or
        arithmetic on those and numbers?"""
        if isinstance(expr, ast.Name):
            return expr.id in self.scalars
        if isinstance(expr, ast.BinOp):
            sides = (expr.left, expr.right)
            return any(self.is_scalar_tensor(side) for side in sides) and all(
                self.is_scalar_tensor(side) or self.is_number(side) for side in sides
            )
        if not isinstance(expr, ast.Call):
            return False
        func = expr.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("mean", "sum")
            and not (expr.args or expr.keywords)
        ):
            return True
        called = getattr(func, "attr", None) or getattr(func, "id", None) or ""
        called = called.lower()
        reduction = next((k.value for k in expr.keywords if k.arg == "reduction"), None)
        if isinstance(reduction, ast.Constant) and reduction.value == "none":
            return False
        return any(word in called for word in ("loss", "criterion", "entropy")) or (
            called == "kl_div"
        )

    def is_number(self, expr: ast.AST | None) -> bool:
        """Does `expr` compute a Python number: `x.item()`, `float(...)`, a `math` function,
        or arithmetic on those, literals and names already holding one?"""
        if isinstance(expr, ast.Constant):
            return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
        if isinstance(expr, ast.Name):
            return expr.id in self.numbers
        if isinstance(expr, ast.UnaryOp):
            return self.is_number(expr.operand)
        if isinstance(expr, ast.BinOp):
            sides = (expr.left, expr.right)
            return any(self.is_number(s) and not isinstance(s, ast.Constant) for s in sides) and (
                all(self.is_number(s) or _count(s) for s in sides)
            )
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr == "item" and not expr.args:
                return True
            callee = self.context.facts.index.imports.qualify(func) or ""
            return callee in ("float", "int", "round") or callee.startswith("math.")
        return False


def _count(expr: ast.AST) -> bool:
    """A setting or a size beside a number (`loss.item() / args.batch_size`, `loss.item() *
    x.size(0)`, `len(batch)`, `x.shape[0]`): a number too."""
    if isinstance(expr, ast.Attribute):
        return isinstance(expr.value, ast.Name) or _count(expr.value)
    if isinstance(expr, ast.Subscript):
        return isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape"
    if isinstance(expr, ast.Call):
        func = expr.func
        return (isinstance(func, ast.Attribute) and func.attr == "size" and bool(expr.args)) or (
            isinstance(func, ast.Name) and func.id == "len"
        )
    return False


def averaged_per_batch(
    context: RuleContext, scope: Scope, loop: Loop, accumulator: str | None
) -> bool:
    """Is `accumulator` divided by `len(<a loader>)` or by a name the loop adds 1 to?"""
    counters = {
        name
        for name, bindings in scope.bindings.items()
        for b in bindings
        if isinstance(b.small, ast.AugAssign)
        and isinstance(b.small.op, ast.Add)
        and isinstance(b.small.value, ast.Constant)
        and b.small.value.value == 1
        and loop.contains(b.loop)
    }
    for node in ast.walk(scope.node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = node.left, node.right
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div):
            left, right = node.target, node.value
        else:
            continue
        if name_of(left) != accumulator:
            continue
        if name_of(right) in counters:
            return True
        if (
            isinstance(right, ast.Call)
            and name_of(right.func) == "len"
            and len(right.args) == 1
            and context.role(scope, name_of(right.args[0]) or "") == "loader"
        ):
            return True
    return False
