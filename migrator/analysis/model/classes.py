"""The classes a module (or a joined program) defines, and which of them runs a method: the
class itself, else a base the module also defines (a Trainer whose `train_step` its base
class in another file of the program has). Shared by origins.py (the calls that run a method)
and instances.py (the method a call on an instance runs)."""

from __future__ import annotations

import ast

from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import ModuleIndex, Scope

MAX_BASES = 8  # base classes followed this deep


def module_classes(index: ModuleIndex) -> dict[str, Scope]:
    """Top-level classes of the module by name."""
    return {
        scope.name: scope
        for scope in index.scopes
        if scope.kind == "class" and scope.parent is index.module_scope
    }


def class_named(index: ModuleIndex, expr: ast.expr) -> Scope | None:
    """The module class `expr` names (`Trainer`, `trainers.Trainer` in a joined program)."""
    called = dotted_name(expr)
    if called is None:
        return None
    return module_classes(index).get(index.aliases.get(called, called))


def method_of(index: ModuleIndex, cls: Scope, method: str, depth: int = 0) -> Scope | None:
    """The function `cls.method` runs: its own, else its bases' (the module's classes, in
    order); None when it may come from a base the module does not define."""
    own = next((m for m in cls.children if m.kind == "function" and m.name == method), None)
    if own is not None or depth > MAX_BASES:
        return own
    for base in cls.node.bases:
        known = class_named(index, base)
        if known is None:
            return None  # the method may be the unknown base's
        found = method_of(index, known, method, depth + 1)
        if found is not None:
            return found
    return None


def made_class(index: ModuleIndex, call: ast.Call) -> Scope | None:
    """The program class whose instance `call` makes: `GPT(config)`, or a class method that
    returns one (`GPT.from_pretrained("gpt2")`, whose every `return` is `cls(...)` or a name
    bound to it). None for anything else."""
    made = class_named(index, call.func)
    if made is not None or not isinstance(call.func, ast.Attribute):
        return made
    owner = class_named(index, call.func.value)
    method = method_of(index, owner, call.func.attr) if owner is not None else None
    if method is None or not _builds_own_class(method.node, owner.name):
        return None
    return owner


def _builds_own_class(function: ast.AST, owner: str) -> bool:
    decorators = {dotted_name(d) for d in function.decorator_list}
    if "classmethod" not in decorators or not function.args.args:
        return False
    makers = {function.args.args[0].arg, owner}  # `cls(...)`, `GPT(...)`
    built = {
        target.id
        for node in ast.walk(function)
        if isinstance(node, ast.Assign) and _makes(node.value, makers)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    returns = [n.value for n in ast.walk(function) if isinstance(n, ast.Return)]
    return bool(returns) and all(
        _makes(value, makers) or (isinstance(value, ast.Name) and value.id in built)
        for value in returns
    )


def _makes(value: ast.expr | None, makers: set[str]) -> bool:
    return isinstance(value, ast.Call) and dotted_name(value.func) in makers


def override(index: ModuleIndex, method: Scope) -> Scope | None:
    """The one subclass method (the module's classes) that overrides `method`, a stub of a
    base class (`raise NotImplementedError`, `pass`, a docstring): what `self._train_epoch()`
    in the base's `train()` runs. None when no subclass, or several, override it."""
    found = overrides(index, method)
    return found[0] if len(found) == 1 else None


def overrides(index: ModuleIndex, method: Scope) -> list[Scope]:
    """Every subclass method (the module's classes) overriding `method`, a stub of a base
    class: what `self.calculate_loss(batch)` in the base's loop may run, one per trainer."""
    cls = method.parent
    if cls is None or cls.kind != "class" or not _stub(method.node):
        return []
    return [
        own
        for other in module_classes(index).values()
        if other is not cls and _derives(index, other, cls, 0)
        for own in other.children
        if own.kind == "function" and own.name == method.name
    ]


def _derives(index: ModuleIndex, cls: Scope, base: Scope, depth: int) -> bool:
    if depth > MAX_BASES:
        return False
    for expr in cls.node.bases:
        known = class_named(index, expr)
        if known is base or (known is not None and _derives(index, known, base, depth + 1)):
            return True
    return False


def _stub(function: ast.AST) -> bool:
    body = [s for s in function.body if not (
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]  # fmt: skip
    return all(isinstance(s, (ast.Pass, ast.Raise)) for s in body)
