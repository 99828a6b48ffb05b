"""The program's call graph: which function of the module (or of the joined program) a call
runs, and who calls a function.

A call runs a function of this module when it names one: `train(...)` (looked up from the
calling scope outwards, as Python does: nested functions, then module level, then the names a
joined program gives them: `engine.train_one_epoch`), `self.fit(...)` (a method of the class or
of one of its bases defined here), `super().__init__(...)`, `Trainer(...)` (its `__init__`),
`obj.step(...)` / `obj(...)` (a method / `__call__` of the one module class `obj` holds an
instance of: instances.py). Anything else (a library call, a method of an object of unknown
class) has no callee: the graph is an under-approximation of calls and rules treat an unknown
callee as unknown, never as "does nothing".
"""

from __future__ import annotations

import ast

from migrator.analysis.model.classes import module_classes
from migrator.analysis.model.instances import instance_class
from migrator.analysis.model.origins import is_method, value_call
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import CallSite, ModuleIndex, Scope


class CallGraph:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.classes = module_classes(index)
        self._callee: dict[int, Scope | None] = {}
        self._callers: dict[int, list[CallSite]] | None = None

    def callee(self, site: CallSite) -> Scope | None:
        key = id(site)
        if key not in self._callee:
            self._callee[key] = self._resolve(site)
        return self._callee[key]

    def callers(self, function: Scope) -> list[CallSite]:
        """Every call of this module that runs `function`."""
        if self._callers is None:
            found: dict[int, list[CallSite]] = {}
            for site in self.index.calls():
                target = self.callee(site)
                if target is not None:
                    found.setdefault(id(target), []).append(site)
            self._callers = found
        return self._callers.get(id(function), [])

    def reachable(self, starts: list[Scope]) -> list[Scope]:
        """`starts` and every function their calls run, transitively (nested scopes are not
        included unless called)."""
        found, pending, seen = [], list(starts), set()
        while pending:
            scope = pending.pop()
            if id(scope) in seen:
                continue
            seen.add(id(scope))
            found.append(scope)
            for site in scope.calls:
                target = self.callee(site)
                if target is not None and id(target) not in seen:
                    pending.append(target)
        return found

    def method(self, cls: Scope, name: str) -> Scope | None:
        """`cls.name`, defined on the class or inherited from a base class of this module."""
        seen: set[int] = set()
        pending = [cls]
        while pending:
            current = pending.pop(0)
            if id(current) in seen:
                continue
            seen.add(id(current))
            for child in current.children:
                if child.kind == "function" and child.name == name:
                    return child
            pending += [b for b in self.bases(current) if b is not None]
        return None

    def bases(self, cls: Scope) -> list[Scope | None]:
        """The base classes of `cls` (None for one that is not a class of this module)."""
        found = []
        for base in cls.node.bases:
            name = dotted_name(base)
            name = self.index.aliases.get(name, name) if name is not None else None
            found.append(self.classes.get(name) if name is not None else None)
        return found

    # -- resolution --------------------------------------------------------------------------
    def _resolve(self, site: CallSite) -> Scope | None:
        func = site.node.func
        if isinstance(func, ast.Name):
            return self._by_name(site.scope, func.id)
        if not isinstance(func, ast.Attribute):
            return None
        receiver = func.value
        if (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
        ):
            return self._super_method(site.scope, func.attr)
        dotted = dotted_name(func)
        if dotted is not None and dotted in self.index.aliases:  # `engine.train(...)`, joined
            return self._by_name(site.scope, self.index.aliases[dotted])
        if isinstance(receiver, ast.Name) and receiver.id == "self" and is_method(site.scope):
            return self.method(site.scope.parent, func.attr)
        if (
            isinstance(receiver, ast.Attribute)
            and isinstance(receiver.value, ast.Name)
            and receiver.value.id == "self"
            and is_method(site.scope)
        ):  # `self.checkpoints.save(...)` of `self.checkpoints = CheckpointManager(...)`
            cls = self._held_class(site.scope.parent, f"self.{receiver.attr}")
            return self.method(cls, func.attr) if cls is not None else None
        if isinstance(receiver, ast.Name):
            cls = instance_class(self.index, site.scope, receiver.id, 0)
            return self.method(cls, func.attr) if cls is not None else None
        return None

    def _held_class(self, cls: Scope, name: str) -> Scope | None:
        """The one class of this module whose instance `self.x` (`name`) holds: every binding
        of it in the methods of `cls` and its bases here makes one (`self.x = C(...)`)."""
        classes, pending, seen = set(), [cls], set()
        while pending:
            current = pending.pop()
            if current is None or id(current) in seen:
                continue
            seen.add(id(current))
            pending += self.bases(current)
            for method in current.children:
                for binding in method.bindings.get(name, []) if method.kind == "function" else ():
                    call = value_call(binding) if binding.kind == "assign" else None
                    if call is None or binding.unpacked:
                        return None
                    called = dotted_name(call.func)
                    found = self.classes.get(self.index.aliases.get(called, called) or "")
                    if found is None:
                        return None
                    classes.add(found)
        return classes.pop() if len(classes) == 1 else None

    def _by_name(self, scope: Scope, name: str) -> Scope | None:
        current: Scope | None = scope
        while current is not None:
            for child in current.children:
                if child.name == name and child.kind in ("function", "class"):
                    return self._runs(child, scope, name)
            if name in current.bindings and current.kind != "class":
                break  # a local variable of that name (an instance, a lambda)
            current = current.parent
        found = self.index.functions.get(name) or self.classes.get(name)
        if found is not None:
            return self._runs(found, scope, name)
        cls = instance_class(self.index, scope, name, 0)  # `loss_scaler(loss, opt)`
        return self.method(cls, "__call__") if cls is not None else None

    def _runs(self, found: Scope, scope: Scope, name: str) -> Scope | None:
        if found.kind == "class":  # `Trainer(...)` runs its `__init__`
            return self.method(found, "__init__")
        return found

    def _super_method(self, scope: Scope, name: str) -> Scope | None:
        if not is_method(scope):
            return None
        for base in self.bases(scope.parent):
            if base is not None:
                return self.method(base, name)
        return None
