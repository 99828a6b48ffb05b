"""Where loader data flows inside a loop (or a helper handed a batch): the names that hold it
by pure access — unpacking, subscripts, attributes, device-keeping tensor methods, identity
comprehensions. Only those lose their `.to(device)` (MIG004)."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.roles.facts import DataRegion
from migrator.analysis.syntax.index import Binding
from migrator.analysis.syntax.views import call_args, name_value


def derive(region: DataRegion) -> set[str]:
    """Seeds plus names bound (only) by pure access to loader data inside the region."""
    names = set(region.seeds)
    scope = region.scope
    candidates: dict[str, list[Binding]] = {}
    for name, bindings in scope.bindings.items():
        inside = [b for b in bindings if b.kind in ("assign", "for") and _binding_in(b, region)]
        if inside:
            candidates[name] = inside
    changed = True
    while changed:
        changed = False
        for name, bindings in candidates.items():
            if name in names:
                continue
            # `x = x.to(device)` keeps x as data only if x was data already: a seed, or bound
            # from data by some other statement.
            grounded = name in region.seeds or any(_derived_value(b, names) for b in bindings)
            if grounded and all(_derived_value(b, names | {name}) for b in bindings):
                names.add(name)
                changed = True
    # A seed rebound from non-data (`x = model(x)`) stops being data for this analysis.
    for name in list(names):
        for binding in candidates.get(name, []):
            if id(binding.small) in region.seed_statements:
                continue
            if binding.kind == "assign" and not _derived_value(binding, names | {name}):
                names.discard(name)
    return names


def _binding_in(binding: Binding, region: DataRegion) -> bool:
    if binding.statement.block.scope is not region.scope:
        return False
    if region.loop is None:
        return True
    return region.loop.contains(binding.loop) and binding.loop is not None


def _derived_value(binding: Binding, names: set[str]) -> bool:
    if binding.kind == "for":
        name, _ = patterns.loader_base(binding.value, _NO_IMPORTS)
        return data_root(binding.value, names) is not None or name in names
    value = binding.element if binding.element is not None else binding.value
    return value is not None and data_root(value, names) is not None


def data_root(expr: ast.AST | None, names: set[str]) -> str | None:
    """The loader-data name `expr` reaches by pure access (subscript, attribute, device-keeping
    tensor methods, identity comprehensions), or None."""
    while True:
        name = name_value(expr)
        if name is not None:
            return name if name in names else None
        if isinstance(expr, (ast.Subscript, ast.Attribute)):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            method = expr.func.attr
            if method in ("items", "values", "keys") or (
                method in patterns.DEVICE_PRESERVING_METHODS
            ):
                expr = expr.func.value
            else:
                return None
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in (
            "tuple", "list", "dict",
        ):  # fmt: skip
            args = call_args(expr)
            if len(args) != 1:
                return None
            expr = args[0].value
        elif isinstance(expr, (ast.DictComp, ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            expr = expr.generators[0].iter
        elif isinstance(expr, (ast.Tuple, ast.List)):
            roots = [
                data_root(e.value if isinstance(e, ast.Starred) else e, names) for e in expr.elts
            ]
            return roots[0] if roots and all(roots) else None
        else:
            return None


class _NoImports:
    def qualify(self, node):
        from migrator.analysis.syntax.imports import dotted_name

        return dotted_name(node)


_NO_IMPORTS = _NoImports()
