"""What `accelerator.prepare(...)` makes, for the per-process values (values.py): each part of
`model, opt, loader = accelerator.prepare(model, opt, loader)` by what it was (a loader stays
a loader, whose items are this process's share), and a module global its functions read
prepared (`loader = DataLoader(...)`, then `loader = accelerator.prepare(loader)` before any
of the module's functions runs: what they read is the prepared loader, not both).

A mixin of values.PerProcessValues: it reads `self.index`, `self.known`, `self._globals` and
evaluates with `self._eval`.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.effects.extents import CONST, Value
from migrator.analysis.effects.value_expressions import PREPARES
from migrator.analysis.model.chains import chain_text
from migrator.analysis.syntax.index import Line, Scope


class PreparedObjects:
    index: object
    known: dict
    _globals: dict
    _eval: object  # ValueExpressions._eval, through the class that mixes this in

    def _prepared_global(self, name: str) -> Value | None:
        """A module global its functions read prepared: the module binds `loader =
        DataLoader(...)`, then `loader = accelerator.prepare(loader)` with no call of the
        module's own functions between the two (none can see the plain one), and no other
        binding; what the functions read is the prepared object, not both."""
        if name in self._globals:
            return self._globals[name]
        self._globals[name] = None
        module = self.index.module_scope
        bindings = module.bindings.get(name, [])
        if len(bindings) < 2 or any(b.statement.block is not module.body for b in bindings):
            return None
        last = bindings[-1]
        parts = self._prepared_parts(last.value, module) if last.kind == "assign" else None
        if not parts:
            return None
        targets = last.small.targets if isinstance(last.small, ast.Assign) else []
        target = targets[0] if len(targets) == 1 else None
        if last.unpacked and isinstance(target, (ast.Tuple, ast.List)):
            names = [patterns.name_of(element) for element in target.elts]
            part = parts[names.index(name)] if name in names and len(parts) == len(names) else None
        else:
            part = parts[0] if len(parts) == 1 else None
        if part is None:
            return None
        first, end = bindings[0].statement.index, last.statement.index
        own = self._own_names(module)
        for statement in module.body.statements[first + 1 : end]:  # Lines, compound nodes
            nodes = statement.body if isinstance(statement, Line) else [statement]
            if any(
                isinstance(node, ast.Call) and _root(node.func) in own
                for top in nodes
                for node in ast.walk(top)
            ):
                return None
        self._globals[name] = part
        return part

    def _own_names(self, module: Scope) -> set[str]:
        """The module's names that run its own code when called: its functions and classes,
        and names bound to instances of its classes (`trainer.evaluate()` may read the
        global)."""
        classes = {s.name for s in self.index.scopes if s.kind == "class" and s.parent is module}
        own = set(self.index.functions) | classes
        for bound, bindings in module.bindings.items():
            if any(isinstance(b.value, ast.Call) and _root(b.value.func) in classes
                   for b in bindings):  # fmt: skip
                own.add(bound)
        return own

    def _prepared_parts(self, source: ast.AST | None, scope: Scope) -> list[Value] | None:
        """`model, opt, loader = accelerator.prepare(model, opt, loader)`: each part's role."""
        if not (isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute)):
            return None
        if source.func.attr not in PREPARES or not self._is_accelerator(source.func.value, scope):
            return None
        return [self._prepared(arg, scope) for arg in source.args]

    def _prepared(self, arg: ast.AST, scope: Scope) -> Value:
        plain = self._eval(arg, scope)
        if plain.roles & {"plainloader", "loader"}:
            return Value(CONST, frozenset({"loader"}))
        if plain.roles & {"optimizer", "scheduler"}:
            return Value(CONST, plain.roles)
        if plain.roles:  # made by a class of the program, or a model already
            return Value(CONST, frozenset({"model"}))
        known = self.known.get(patterns.name_of(arg) or chain_text(arg) or "")
        if known is not None:  # what the analysis found it to be (a parameter, mostly)
            return Value(CONST, frozenset({known}))
        # what a caller elsewhere passes, unknown to the analysis too: a model where it is
        # called, a loader where it is iterated
        return Value(CONST, frozenset({"model", "loader"}))

    def _is_accelerator(self, expr: ast.AST, scope: Scope) -> bool:
        return "accelerator" in self._eval(expr, scope).roles

    # -- statements ----------------------------------------------------------------------------


def _root(func: ast.expr) -> str | None:
    """`trainer` of `trainer.evaluate`, `train` of `train`: the name a call starts from."""
    while isinstance(func, (ast.Attribute, ast.Call, ast.Subscript)):
        func = func.func if isinstance(func, ast.Call) else func.value
    return func.id if isinstance(func, ast.Name) else None
