"""Loaders a loop reaches through a container: `loaders[phase]` over `loaders = {"train":
loader_train, "valid": loader_valid}` (brain-segmentation), `dataloaders[phase]` over a dict
comprehension of DataLoaders (the torchvision fine-tuning tutorial), `loaders["valid"]`,
`loaders[0]` of a tuple, a dict a program function returns (loader_values.py reads them).

A loop variable that takes the loaders in turn reads them all: `for loader in (train_loader,
val_loader):`, `for phase, loader in [("train", train_loader), ("val", val_loader)]:`,
`for phase, loader in loaders.items():`.

A key the loop picks at run time (`phase`) reads every entry; a constant key reads its own.
Entries that are names of the scope binding the container are its loaders, prepared where
they are made (before the container takes them); the others (a `DataLoader(...)` written in
the container, a name of the helper that returns it) are prepared in place, where the
container is made: `{"train": accelerator.prepare(DataLoader(...)), ...}`. Every entry must
hold a DataLoader, or the loop draws from no container of loaders.

A mixin of LoopSources (loop_sources.py): it reads `self.index`, `self.facts`.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.loader_values import LoaderValues, pick
from migrator.analysis.syntax.index import Scope, Statement

Held = tuple[ast.expr, Statement]


class ContainerSources:
    def _container_loaders(
        self, expr: ast.Subscript, scope: Scope
    ) -> tuple[Scope, list[str], list[Held]] | None:
        """(the scope that binds the container, the loaders it holds by name there, the
        loaders it holds without one) for `container[key]` read in `scope`; None when the
        container is not one of DataLoaders this module can read."""
        holder = expr.value.id if isinstance(expr.value, ast.Name) else None
        origin = self.facts.origin(scope, holder) if holder is not None else None
        if origin is None or "." in origin.name or "[" in origin.name:
            return None
        values = LoaderValues(self.index)
        entries = values.elements(origin.scope, ast.Name(id=origin.name, ctx=ast.Load()))
        picked = pick(entries, expr.slice) if entries else []
        if not picked:
            return None
        names: list[str] = []
        held: list[Held] = []
        for entry in picked:
            if entry.statement is None or not values.is_loader(entry.scope, entry.value):
                return None
            name = patterns.name_of(entry.value)
            if name is not None and entry.scope is origin.scope:
                if name not in names:
                    names.append(name)
            elif all(entry.value is not h[0] for h in held):
                held.append((entry.value, entry.statement))
        return origin.scope, names, held

    def _loop_variable_loaders(self, name: str, scope: Scope) -> tuple[Scope, list[str]] | None:
        """(the scope, the loaders) a loop variable takes in turn (`for phase, loader in
        loaders.items():`), when each is a loader named in that scope; None otherwise."""
        origin = self.facts.origin(scope, name)
        bindings = origin.scope.assigns(origin.name) if origin is not None else []
        if len(bindings) != 1 or bindings[0].kind != "for" or bindings[0].loop is None:
            return None
        node = bindings[0].loop.node
        position = _target_position(node.target, origin.name)
        iterable, pairs = node.iter, False
        if (
            isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Attribute)
            and iterable.func.attr in ("items", "values")
            and not iterable.args
        ):  # `loaders.items()`: (key, loader) pairs; `loaders.values()`: the loaders
            pairs = iterable.func.attr == "items"
            iterable = iterable.func.value
        values = LoaderValues(self.index)
        entries = values.elements(origin.scope, iterable)
        if not entries or position is False or (pairs and position != 1):
            return None
        names: list[str] = []
        for entry in entries:
            value = entry.value
            if position is not None and not pairs:  # `for phase, loader in [("train", a)]`
                if not isinstance(value, ast.Tuple) or position >= len(value.elts):
                    return None
                value = value.elts[position]
            found = patterns.name_of(value)
            if found is None or entry.scope is not origin.scope:
                return None
            if not values.is_loader(entry.scope, value):
                return None
            if found not in names:
                names.append(found)
        return origin.scope, names


def _target_position(target: ast.expr, name: str) -> int | None | bool:
    """None: the target is `name` itself; its position in a flat tuple target; False:
    neither."""
    if isinstance(target, ast.Name):
        return None if target.id == name else False
    if isinstance(target, (ast.Tuple, ast.List)):
        for position, element in enumerate(target.elts):
            if isinstance(element, ast.Name) and element.id == name:
                return position
    return False
