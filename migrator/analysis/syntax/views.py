"""Small views of `ast` that the analysis and the rules share: a call's arguments in source
order (`ast` keeps positional and keyword arguments apart), names as LibCST-era code named them
(`None`/`True`/`False` are names; `self.x` is one name), and a source-order walk."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

SELF = "self"
_SINGLETONS = (None, True, False)


@dataclass(frozen=True)
class Arg:
    """One argument of a call: `value`, `*value`, `**value` or `keyword=value`."""

    keyword: str | None
    value: ast.expr
    star: str  # "", "*" or "**"
    node: ast.AST  # what carries its position: the value, the Starred, or the keyword

    @property
    def plain(self) -> bool:
        return self.keyword is None and not self.star


def call_args(call: ast.Call) -> list[Arg]:
    """The arguments of `call` in source order."""
    found = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            found.append(Arg(None, arg.value, "*", arg))
        else:
            found.append(Arg(None, arg, "", arg))
    for keyword in call.keywords:
        if keyword.arg is None:
            found.append(Arg(None, keyword.value, "**", keyword))
        else:
            found.append(Arg(keyword.arg, keyword.value, "", keyword))
    if call.keywords and call.args and isinstance(call.args[-1], ast.Starred):
        found.sort(key=lambda a: (a.node.lineno, a.node.col_offset))  # `f(k=1, *rest)`
    return found


def positional(call: ast.Call) -> list[Arg]:
    return [Arg(None, a, "", a) for a in call.args if not isinstance(a, ast.Starred)]


def keyword(call: ast.Call, name: str) -> Arg | None:
    for item in call.keywords:
        if item.arg == name:
            return Arg(name, item.value, "", item)
    return None


def keyword_value(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    """The value passed as `name=`, else the `position`-th plain positional argument."""
    for item in call.keywords:
        if item.arg == name:
            return item.value
    if position is not None:
        plain = [a for a in call.args if not isinstance(a, ast.Starred)]
        if position < len(plain):
            return plain[position]
    return None


def name_value(expr: ast.AST | None) -> str | None:
    """The identifier of a Name (`None`, `True` and `False` count: LibCST's names)."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Constant) and (expr.value is None or isinstance(expr.value, bool)):
        return str(expr.value)
    return None


def name_of(expr: ast.AST | None) -> str | None:
    """The name an expression stands for: `model`, or `self.model` for an instance attribute
    (a Trainer's objects are named that way across its methods)."""
    if isinstance(expr, ast.Name):
        return expr.id
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == SELF
    ):
        return f"{SELF}.{expr.attr}"
    return name_value(expr)


def root_name(expr: ast.AST) -> str | None:
    """`model` for `model`, `model.encoder`, `model.module.encoder`; `self.model` for
    `self.model.encoder`; None otherwise."""
    while isinstance(expr, ast.Attribute):
        if isinstance(expr.value, ast.Name) and expr.value.id == SELF:
            return f"{SELF}.{expr.attr}"
        expr = expr.value
    return name_value(expr)


def integer_text(source, expr: ast.AST | None) -> str | None:
    """The source text of an integer literal (`0`, `0x10`), else None."""
    if (
        isinstance(expr, ast.Constant)
        and isinstance(expr.value, int)
        and not isinstance(expr.value, bool)
    ):
        return source.segment(expr)
    return None


def preorder(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and its descendants, depth first, in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children = _children(current)
        stack.extend(reversed(children))


def _children(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.IfExp):
        return [node.body, node.test, node.orelse]
    if isinstance(node, ast.Dict):
        found = []
        for key, value in zip(node.keys, node.values):
            if key is not None:
                found.append(key)
            found.append(value)
        return found
    if isinstance(node, ast.Call):
        return [node.func, *(a.node for a in call_args(node))]
    return list(ast.iter_child_nodes(node))


def contains(tree: ast.AST, node: ast.AST) -> bool:
    return any(current is node for current in preorder(tree))
