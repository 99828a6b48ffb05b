"""Batch items the original kept on the host, in loops that now draw from a prepared loader.

`for x, y in loader:` with `x = x.cuda()` but `y` never moved: the original ran the model on
the device and kept the labels on the CPU, where it met other host values (`all_labels.
append(y)` beside `all_logits.append(logits.cpu())`, `accuracy_score(y, preds)`,
`y.numpy()`). A prepared loader puts every item on `accelerator.device`, so those reads get
a host copy (`y.cpu()`) to stay what they were (SPEC §3b.5). A loop draws from a prepared
loader when it iterates one by name, or a parameter some call fills with one
(`test_dataset(self.train_loader)`, a solver's evaluation reused on the training set).

Only loops that place some item themselves count (`x = x.cuda()`, `loss_fn(out, y.to(d))`):
a loop that places none ran on one device, and its items meet the model there. An item the
loop binds again (`y = y.to(device)`) is no longer the loader's.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.dataflow import data_root
from migrator.analysis.model.origins import argument_for, calls_of
from migrator.analysis.syntax.index import Line, Loop, ModuleIndex

# libraries that compute on host values only
HOST_LIBRARIES = ("numpy.", "sklearn.", "scipy.", "pandas.", "matplotlib.", "cv2.", "PIL.")
# methods whose result is a host value
TO_HOST = frozenset({"cpu", "numpy", "tolist", "item"})
COLLECTING = frozenset({"append", "extend"})


def host_reads(index: ModuleIndex, prepared_loader, devices_of) -> list[ast.Name]:
    """The reads of batch items that need a host copy (module docstring).
    `prepared_loader(scope, name)`: does `name` in `scope` hold a prepared loader?
    `devices_of(scope)`: the device names of `scope` (placement calls read them)."""
    found: list[ast.Name] = []
    for scope in index.scopes:
        for loop in scope.loops:
            if loop.iter is None or not _draws_prepared(index, loop, prepared_loader):
                continue
            found += _loop_reads(index, loop, devices_of(scope))
    return found


def _draws_prepared(index: ModuleIndex, loop: Loop, prepared_loader) -> bool:
    name, _ = patterns.loader_base(loop.iter, index.imports)
    if name is None:
        return False
    scope = loop.scope
    if prepared_loader(scope, name):
        return True
    if name not in scope.params or scope.assigns(name):
        return False
    for site in calls_of(index, scope):  # `test_dataset(self.train_loader)`
        argument = argument_for(site.node, scope, name)
        passed = patterns.name_of(argument) if argument is not None else None
        if passed is not None and prepared_loader(site.scope, passed):
            return True
    return False


def _loop_reads(index: ModuleIndex, loop: Loop, devices: set[str]) -> list[ast.Name]:
    items = set(loop.target_names)
    rebound = _rebound(loop, items)
    placing = any(  # the loop puts an item on the device: `x = x.cuda()`, `loss(out, y.to(d))`
        site.scope is loop.scope
        and site.receiver is not None
        and data_root(site.receiver, items) is not None
        and patterns.placement_call(site.node, devices, index.imports) is not None
        and not patterns.moves_to_cpu(site.node, index.imports)
        for site in loop.calls
    )
    kept = items - rebound
    if not placing or not kept:
        return []
    host = _host_names(loop)
    reads = []
    for name in sorted(kept):
        for use in loop.scope.uses.get(name, []):
            if use.loop is not None and loop.contains(use.loop) and _host_read(
                index, use, host
            ):  # fmt: skip
                reads.append(use.node)
    return reads


def _rebound(loop: Loop, items: set[str]) -> set[str]:
    """Items the loop binds again (`y = y.to(device)` after a helper): not the loader's."""
    return {
        name
        for name in items
        for binding in loop.scope.bindings.get(name, [])
        if binding.kind != "for" and binding.loop is not None and loop.contains(binding.loop)
    }


def _host_names(loop: Loop) -> set[str]:
    """Names the loop binds to host values (`preds = logits.argmax(1).cpu()`)."""
    names = set()
    for binding_list in loop.scope.bindings.values():
        for binding in binding_list:
            value = binding.value
            if binding.loop is None or not loop.contains(binding.loop) or value is None:
                continue
            if _on_host(value, set()):
                names.add(binding.name)
    return names


def _on_host(expr: ast.AST, host: set[str]) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and node.id in host:
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and (node.func.attr in TO_HOST)
        ):
            return True
    return False


def _host_read(index: ModuleIndex, use, host: set[str]) -> bool:
    """Does this read of an item meet host values: collected into a list, handed to a host
    library, read as numpy, or computed with a host value?"""
    node = use.node
    call = use.call
    if use.kind == "attr":
        return use.attr == "numpy"  # `y.numpy()` fails on a device tensor
    if use.kind == "arg" and call is not None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in COLLECTING:
            return any(a is node for a in call.args)
        qualified = index.imports.qualify(func) or ""
        return qualified.startswith(HOST_LIBRARIES)
    parent = _parent_operation(use.statement.node, node)
    if isinstance(parent, ast.BinOp):
        other = parent.right if parent.left is node else parent.left
        return _on_host(other, host)
    if isinstance(parent, ast.Compare):
        others = [parent.left, *parent.comparators]
        return any(_on_host(o, host) for o in others if o is not node)
    return False


def _parent_operation(statement, node: ast.AST) -> ast.AST | None:
    roots = statement.body if isinstance(statement, Line) else [statement]
    for parent in (p for root in roots for p in ast.walk(root)):
        if isinstance(parent, ast.BinOp) and node in (parent.left, parent.right):
            return parent
        if isinstance(parent, ast.Compare) and (
            parent.left is node or any(c is node for c in parent.comparators)
        ):
            return parent
    return None
