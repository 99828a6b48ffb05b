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


# Mode switches that return the module itself: `model = self.model.train()` names the same object.
MODE_SWITCHES = {"train", "eval"}


def mode_alias(scope, name: str) -> str | None:
    """`self.model` for `model` when a method binds it once as `model = self.model.train()`
    (`.eval()`): a second name for the module switched to a mode, which is the module. None
    otherwise (a plain `model = self.model` stays a name of its own, prepared as such)."""
    if scope.kind != "function" or name in scope.params or "." in name:
        return None
    bindings = scope.bindings.get(name, [])
    if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].unpacked:
        return None
    value = bindings[0].value
    if not switched(value):
        return None
    while switched(value):
        value = value.func.value
    text = index_name(value)
    return text if text is not None and text.startswith("self.") else None


def switched(value: ast.AST | None) -> bool:
    """`m.train()`, `m.eval()`: the module itself, switched to a mode."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in MODE_SWITCHES
        and not value.keywords
        and len(value.args) <= 1
    )


def index_name(expr: ast.expr) -> str | None:
    """`model`, `self.model` (what the index names)."""
    if isinstance(expr, ast.Name):
        return expr.id
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and (expr.value.id == "self")
    ):
        return f"self.{expr.attr}"
    return None
