"""The state of one function's walk in the per-process value flow (values.py): what its own
variables hold at a point, what it returned or yielded, and how two states join."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.analysis.effects.extents import Value, join


@dataclass(eq=False)
class Frame:
    """One function's walk: what its own variables hold at this point."""

    state: dict | None = None
    locals: set | None = None
    returned: Value | None = None
    yielded: Value | None = None  # what a generator yields

    def __post_init__(self) -> None:
        self.state = {} if self.state is None else self.state
        self.locals = set() if self.locals is None else self.locals


def joined(a: dict[str, Value], b: dict[str, Value]) -> dict[str, Value]:
    joined = dict(a)
    for name, value in b.items():
        joined[name] = join(joined[name], value) if name in joined else value
    return joined


def assigned_names(node: ast.AST) -> set[str]:
    """The plain names a function (or the module) binds in its own body."""
    found: set[str] = set()
    stack = list(ast.iter_child_nodes(node))
    while stack:
        inner = stack.pop()
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
            found.add(inner.id)
        stack.extend(ast.iter_child_nodes(inner))
    return found
