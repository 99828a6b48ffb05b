"""Which values are DataLoaders: where the value a name or an expression holds comes from,
followed back to a `DataLoader(...)` call through what real scripts put between them:

    loader = DataLoader(ds)                         # made here
    dataloader = loader                             # an alias
    train_loader, val_loader = build_loaders(cfg)   # a program function's return (tuple
    def build_loaders(cfg):                         # positions, names bound in it, nested
        ...; return train_loader, val_loader        # helpers, `self._make_loader(...)`)
    loaders = {"train": train_loader, "valid": DataLoader(...)}   # a dict, list or tuple
    loaders["valid"], loaders[phase], loaders[0]    # read back by key or position

Nothing here prepares anything: the analysis asks whether a loop draws from a DataLoader
(regions.py: evaluation loops; loop_sources.py: containers) and names what to prepare.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import (
    argument_for,
    calls_of,
    class_methods,
    constructions,
    instance_origin,
    is_method,
)
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Binding, ModuleIndex, Scope, Statement

DEPTH = 8  # helpers returning helpers' loaders: followed this deep


@dataclass(frozen=True, eq=False)
class Entry:
    """One value a container holds: where it is written, and under which key (a dict
    literal's string key, a list's or tuple's position; None in a comprehension)."""

    scope: Scope
    value: ast.expr
    key: object
    statement: Statement | None  # the statement that writes it (a binding, a `return`)


def callee_function(index: ModuleIndex, scope: Scope, call: ast.Call) -> Scope | None:
    """The function of this module (or joined program) `call` runs: by name, under an alias
    the program's imports give it (`data.build_loaders`), or a sibling method
    (`self._create_dataloader(...)`)."""
    func = call.func
    if isinstance(func, ast.Name):
        found = index.functions.get(func.id)
        return found if found is not None and found.kind == "function" else None
    dotted = dotted_name(func)
    if dotted is not None and dotted in index.aliases:
        found = index.functions.get(dotted)
        return found if found is not None and found.kind == "function" else None
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == patterns.SELF
        and is_method(scope)
    ):
        return next((m for m in class_methods(scope) if m.name == func.attr), None)
    return None


def returns(function: Scope) -> list[ast.Return]:
    """The `return value` statements of `function` itself (not of functions inside it)."""
    found, stack = [], list(ast.iter_child_nodes(function.node))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            if node.value is not None:
                found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                   ast.ClassDef)):  # fmt: skip
            stack.extend(ast.iter_child_nodes(node))
    return found


def position_in_target(binding: Binding) -> int | None:
    """The position of `binding`'s name in its flat tuple target (`a, b = f()`: b is 1)."""
    small = binding.small
    targets = small.targets if isinstance(small, ast.Assign) else []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            for position, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    return None
                if patterns.name_of(element) == binding.name:
                    return position
    return None


class LoaderValues:
    """Answers "does this value come from a DataLoader?" for one module's index."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.imports = index.imports

    # -- names -------------------------------------------------------------------------------
    def name_is_loader(self, scope: Scope, name: str, depth: int = 0) -> bool:
        """Every binding of `name` in `scope` (which binds it) holds a DataLoader."""
        bindings = [b for b in scope.assigns(name) if b.kind in ("assign", "with")]
        if not bindings or depth > DEPTH or len(bindings) != len(scope.assigns(name)):
            return False
        return all(self.binding_is_loader(b, scope, depth) for b in bindings)

    def binding_is_loader(self, binding: Binding, scope: Scope, depth: int = 0) -> bool:
        if binding.unpacked and binding.element is None:  # `a, b = build_loaders(cfg)`
            position = position_in_target(binding)
            call = binding.value
            if position is None or not isinstance(call, ast.Call):
                return False
            return self._returns_loader(scope, call, position, depth)
        value = binding.element if binding.element is not None else binding.value
        return value is not None and self.is_loader(scope, value, depth)

    # -- expressions -------------------------------------------------------------------------
    def is_loader(self, scope: Scope, expr: ast.expr, depth: int = 0) -> bool:
        """`expr`, read in `scope`, holds a DataLoader."""
        if depth > DEPTH:
            return False
        if isinstance(expr, ast.Call):
            if patterns.is_loader_call(expr, self.imports):
                return True
            if _prepares_one(expr):  # `accelerator.prepare(DataLoader(...))`, migrated already
                return self.is_loader(scope, expr.args[0], depth + 1)
            return self._returns_loader(scope, expr, None, depth)
        if isinstance(expr, ast.Subscript):
            entries = self.elements(scope, expr.value, depth + 1)
            if entries is None:
                return False
            picked = pick(entries, expr.slice)
            return bool(picked) and all(self.is_loader(e.scope, e.value, depth + 1) for e in picked)
        name = patterns.name_value(expr)
        if name is None:
            return False
        home = _binding_scope(scope, name)
        return home is not None and self.name_is_loader(home, name, depth + 1)

    def elements(self, scope: Scope, expr: ast.expr, depth: int = 0) -> list[Entry] | None:
        """The entries of the container `expr` holds: a dict, list or tuple literal or
        comprehension, through names and program functions returning one (None: not such a
        container, or not one this module can read)."""
        return self._elements(scope, expr, None, depth)

    def _elements(self, scope: Scope, expr, statement, depth: int) -> list[Entry] | None:
        if depth > DEPTH or expr is None:
            return None
        if isinstance(expr, ast.Dict):
            if any(k is None for k in expr.keys):  # `{**base, ...}`
                return None
            return [Entry(scope, v, patterns.string_value(k), statement)
                    for k, v in zip(expr.keys, expr.values)]  # fmt: skip
        if isinstance(expr, (ast.List, ast.Tuple)):
            if any(isinstance(e, ast.Starred) for e in expr.elts):
                return None
            return [Entry(scope, e, position, statement) for position, e in enumerate(expr.elts)]
        if isinstance(expr, ast.DictComp):
            return [Entry(scope, expr.value, None, statement)]
        if isinstance(expr, ast.ListComp):
            return [Entry(scope, expr.elt, None, statement)]
        if isinstance(expr, ast.Call):
            function = callee_function(self.index, scope, expr)
            if function is None:
                return None
            found = []
            for node in returns(function):
                at = self.index.statement_of_small(node)
                inner = self._elements(function, node.value, at, depth + 1)
                if inner is None:
                    return None
                found += inner
            return found or None
        name = patterns.name_value(expr)
        home = _binding_scope(scope, name) if name is not None else None
        if home is None:
            return None
        bindings = home.assigns(name)
        if not bindings or any(b.kind != "assign" or b.unpacked for b in bindings):
            return None
        found = []
        for binding in bindings:
            inner = self._elements(home, binding.value, binding.statement, depth + 1)
            if inner is None:
                return None
            found += inner
        return found

    def _returns_loader(
        self, scope: Scope, call: ast.Call, position: int | None, depth: int
    ) -> bool:
        """`call` runs a program function whose every return holds a DataLoader (at
        `position` of the returned tuple)."""
        function = callee_function(self.index, scope, call)
        if function is None:
            return False
        values = [node.value for node in returns(function)]
        if not values:
            return False
        for value in values:
            if position is not None:
                if not isinstance(value, (ast.Tuple, ast.List)) or position >= len(value.elts):
                    return False
                value = value.elts[position]
            if not self.is_loader(function, value, depth + 1):
                return False
        return True

    # -- where they are made -------------------------------------------------------------------
    def made_by(self, scope: Scope, name: str, depth: int = 0) -> list[ast.Call]:
        """The `DataLoader(...)` calls the loader `name` holds in `scope` comes from, through
        aliases, program functions' returns, the arguments the calls of a function pass its
        parameter and the attributes a class's methods bind (`self.loader = loader`) ([]
        where that cannot be read)."""
        if depth > DEPTH:
            return []
        if name.startswith(patterns.SELF + "."):
            found_at = instance_origin(scope, name)
            home = found_at.scope if found_at is not None else None
        else:
            home = _binding_scope(scope, name) or _parameter_of(scope, name)
        if home is None:
            return []
        found: list[ast.Call] = []
        if home.kind == "function" and name in home.params:
            found += self._passed_calls(home, name, depth)
        for binding in home.assigns(name):
            if binding.unpacked and binding.element is None:  # `a, b = build_loaders(cfg)`
                position = position_in_target(binding)
                call = binding.value
                if position is not None and isinstance(call, ast.Call):
                    found += self._returned_calls(home, call, position, depth)
                continue
            value = binding.element if binding.element is not None else binding.value
            found += self.calls_in(home, value, depth + 1) if value is not None else []
        return found

    def calls_in(self, scope: Scope, expr: ast.expr, depth: int = 0) -> list[ast.Call]:
        """`made_by` for an expression."""
        if depth > DEPTH:
            return []
        if isinstance(expr, ast.Call):
            if patterns.is_loader_call(expr, self.imports):
                return [expr]
            if _prepares_one(expr):
                return self.calls_in(scope, expr.args[0], depth + 1)
            return self._returned_calls(scope, expr, None, depth)
        name = patterns.name_value(expr)
        return self.made_by(scope, name, depth + 1) if name is not None else []

    def _passed_calls(self, function: Scope, param: str, depth: int) -> list[ast.Call]:
        """What the calls of `function` (the constructions of its class, for `__init__`)
        pass its parameter `param`."""
        if function.name == "__init__" and is_method(function):
            sites = constructions(self.index, function.parent)
        else:
            sites = calls_of(self.index, function)
        found = []
        for site in sites:
            argument = argument_for(site.node, function, param)
            if argument is not None:
                found += self.calls_in(site.scope, argument, depth + 1)
        return found

    def _returned_calls(self, scope, call: ast.Call, position: int | None, depth: int) -> list:
        function = callee_function(self.index, scope, call)
        if function is None:
            return []
        found = []
        for node in returns(function):
            value = node.value
            if position is not None:
                if not isinstance(value, (ast.Tuple, ast.List)) or position >= len(value.elts):
                    continue
                value = value.elts[position]
            found += self.calls_in(function, value, depth + 1)
        return found


def pick(entries: list[Entry], key: ast.expr) -> list[Entry]:
    """The entries a subscript reads: by a constant key or position, else every entry."""
    constant = key.value if isinstance(key, ast.Constant) else None
    if constant is not None and any(e.key == constant for e in entries):
        return [e for e in entries if e.key == constant]
    if constant is not None and not any(e.key is None for e in entries):
        return []
    return list(entries)


def _prepares_one(call: ast.Call) -> bool:
    """`x.prepare(one)`: an Accelerator's prepare of one object hands back that object."""
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "prepare"
        and len(call.args) == 1
        and not call.keywords
    )


def _parameter_of(scope: Scope, name: str) -> Scope | None:
    """The function (`scope` or one enclosing it) whose parameter `name` is, seen from
    `scope`."""
    current: Scope | None = scope
    while current is not None:
        if current.kind == "function" and name in current.params:
            return current
        if current.kind != "class" and current.is_local(name):
            return None
        current = current.parent
    return None


def _binding_scope(scope: Scope, name: str) -> Scope | None:
    """The scope whose variable `name` is, seen from `scope` (classes skipped)."""
    current: Scope | None = scope
    while current is not None:
        if current.kind != "class" and current.is_local(name):
            return current
        if current.kind == "function" and name in current.params:
            return None  # a parameter: where it comes from is the callers' business
        current = current.parent
    return None
