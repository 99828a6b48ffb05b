"""Which module a call runs the forward of, however it is spelled: `model(x)`,
`model.forward(x)`, `model.train()(x)`, `model.train().forward(x)`, `self.model.eval()(x)`.
A module's mode and placement methods (`train()`, `eval()`, `to(...)`, `float()`, ...) return the
module itself, so a call chained on them runs the same forward (and, on a prepared model, the
DDP wrapper's, which averages the gradients)."""

from __future__ import annotations

import ast

# Methods of `nn.Module` that return the module itself.
RETURN_SELF = {
    "train", "eval", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "type",
    "requires_grad_", "apply", "zero_grad_",
}  # fmt: skip


def forwarded(func: ast.expr) -> ast.expr:
    """The expression a call of `func` runs the forward of: `model` for `model.forward`,
    `model.train()` and `model.train().forward`; `func` itself otherwise (`model` for
    `model(x)`, and a method such as `model.generate` as it is)."""
    base = func.value if isinstance(func, ast.Attribute) and func.attr == "forward" else func
    while (
        isinstance(base, ast.Call)
        and isinstance(base.func, ast.Attribute)
        and base.func.attr in RETURN_SELF
    ):
        base = base.func.value
    return base


def runs_forward(func: ast.expr) -> bool:
    """Is a call of `func` a forward by one of the spellings above other than `model(x)`?"""
    return forwarded(func) is not func
