"""Objects called like functions: `loss_scaler(loss, optimizer, ...)` runs the `__call__` of
the module class the name holds an instance of (DeiT's and MAE's loss scalers, whose
`__call__` does the backward and the optimizer step).

A name holds an instance of class `C` when every binding of it in the scope that owns it is
`C(...)`, or when it is a parameter and every call of its function passes such a name (the
scaler made in `main()` and handed to `train_one_epoch`). Anything else (a rebinding, a value
passed through a container, a subclass, a module-level instance rebound elsewhere) is not
resolved: the call then stays an unknown call.
"""

from __future__ import annotations

import ast

from migrator.analysis.model.classes import method_of, module_classes
from migrator.analysis.model.origins import argument_for, call_sites_of, value_call
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import ModuleIndex, Scope

MAX_DEPTH = 8  # call sites followed back from a parameter


def called_method(index: ModuleIndex, scope: Scope, name: str, method: str) -> Scope | None:
    """The method `method` of the module class that `name`, read in `scope`, holds an instance
    of; None when that class is not certain or has no such method (an inherited one included:
    a class with a base is not resolved)."""
    found = instance_class(index, scope, name, 0)
    if found is None or found.node.bases or found.node.keywords:
        return None
    return next((m for m in found.children if m.kind == "function" and m.name == method), None)


def instance_method(index: ModuleIndex, scope: Scope, name: str, method: str) -> Scope | None:
    """`trainer.train_step(...)`: the method `method` that a call on `name` runs, when `name`,
    read in `scope`, holds an instance of a module class (a joined program's included): found
    in that class or, through the bases the module defines, in one of them (a Trainer whose
    `train_step` a base class in another file of the program defines). None when the class is
    not certain, or the method may come from a base the module does not hold."""
    found = instance_class(index, scope, name, 0)
    return method_of(index, found, method) if found is not None else None


def instance_class(index: ModuleIndex, scope: Scope, name: str, depth: int) -> Scope | None:
    owner = _owner(scope, name)
    if owner is None or depth > MAX_DEPTH:
        return None
    bindings = owner.bindings.get(name, [])
    classes = module_classes(index)
    found: set[int] = set()
    result: Scope | None = None
    for binding in bindings:
        if binding.kind == "param":
            candidates = _from_callers(index, owner, name, depth)
        elif binding.kind == "assign" and not binding.unpacked:
            call = value_call(binding)
            called = dotted_name(call.func) if call is not None else None
            named = classes.get(index.aliases.get(called, called)) if called else None
            candidates = [named] if named is not None else [None]
        else:
            candidates = [None]
        for candidate in candidates:
            if candidate is None:
                return None
            found.add(id(candidate))
            result = candidate
    return result if len(found) == 1 else None


def _from_callers(index: ModuleIndex, function: Scope, param: str, depth: int) -> list:
    """The class each caller's argument for `param` holds an instance of ([None] if one
    caller's is unknown)."""
    if function.kind != "function":
        return [None]
    sites = call_sites_of(index, function)
    if not sites:
        return [None]
    found = []
    for site in sites:
        argument = argument_for(site.node, function, param)
        if not isinstance(argument, ast.Name):
            return [None]
        found.append(instance_class(index, site.scope, argument.id, depth + 1))
    return found


def _owner(scope: Scope | None, name: str) -> Scope | None:
    """The scope whose variable `name` is, as read in `scope` (class bodies are skipped, as
    Python does for the functions in them)."""
    first = scope
    while scope is not None:
        own = name in scope.bindings and name not in scope.declared_global
        if own and (scope.kind != "class" or scope is first):
            return scope
        if name in scope.declared_global:
            return _module(scope)
        scope = scope.parent
    return None


def _module(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope
