"""Statements left with no effect once placement calls were stripped (`x`, `x = x`,
`batch = {k: v for k, v in batch.items()}`): the renderer drops them."""

from __future__ import annotations

import ast

from migrator.source import quiet_parse


def does_nothing(text: str) -> bool:
    """A simple statement with no effect left after placement calls were stripped."""
    try:
        tree = quiet_parse(text.strip())
    except SyntaxError:
        return False
    if len(tree.body) != 1:
        return False
    small = tree.body[0]
    if isinstance(small, ast.Expr):
        return _inert(small.value)
    if isinstance(small, ast.Assign) and len(small.targets) == 1:
        target, value = small.targets[0], small.value
        return _same(target, value) or _identity_comprehension(target, value)
    return False


def _inert(value: ast.expr) -> bool:
    """A name, an attribute, None/True/False, or `a if <test> else b` of those whose test
    only asks (`model if torch.cuda.is_available() else None`, once `.cuda()` went)."""
    if isinstance(value, ast.IfExp):
        return _inert(value.body) and _inert(value.orelse) and _asks(value.test)
    return isinstance(value, (ast.Name, ast.Attribute)) or (
        isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, bool))
    )


def _asks(test: ast.expr) -> bool:
    """`torch.cuda.is_available()`, `args.cuda`, `not x`: a test without effects."""
    if isinstance(test, ast.Call):
        return (
            isinstance(test.func, ast.Attribute)
            and test.func.attr in ("is_available", "is_bf16_supported")
            and not test.args
        )
    if isinstance(test, ast.UnaryOp):
        return _asks(test.operand)
    if isinstance(test, ast.BoolOp):
        return all(_asks(v) for v in test.values)
    return isinstance(test, (ast.Name, ast.Attribute, ast.Constant))


def _same(a: ast.expr | None, b: ast.expr | None) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, (ast.Tuple, ast.List)) and isinstance(b, (ast.Tuple, ast.List)):
        return len(a.elts) == len(b.elts) and all(_same(x, y) for x, y in zip(a.elts, b.elts))
    return ast.unparse(a) == ast.unparse(b)  # ignores Load/Store context and formatting


def _identity_comprehension(target: ast.expr, value: ast.expr) -> bool:
    """`{k: v for k, v in t.items()}`, `[x for x in t]`, `tuple(x for x in t)`, ... == t."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and (
            value.func.id in ("tuple", "list", "dict")
            and len(value.args) == 1
            and not value.keywords
        )
    ):
        value = value.args[0]
        if not isinstance(value, (ast.GeneratorExp, ast.ListComp, ast.DictComp)):
            return _same(target, value)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)) and len(value.generators) == 1:
        generator = value.generators[0]
        return (
            not generator.ifs
            and not generator.is_async
            and _same(value.elt, generator.target)
            and _same(target, generator.iter)
        )
    if isinstance(value, ast.DictComp) and len(value.generators) == 1:
        generator = value.generators[0]
        iterable = generator.iter
        if (
            generator.ifs
            or not isinstance(iterable, ast.Call)
            or not isinstance(iterable.func, ast.Attribute)
            or iterable.func.attr != "items"
            or iterable.args
        ):
            return False
        pair = generator.target
        return (
            isinstance(pair, ast.Tuple)
            and len(pair.elts) == 2
            and _same(value.key, pair.elts[0])
            and _same(value.value, pair.elts[1])
            and _same(target, iterable.func.value)
        )
    return False
