"""Code already on the target API (issue 12, item 1): what migrate leaves alone.

A module that imports an `Accelerator` (HF Accelerate's or our runtime's), creates one, or
calls an accelerator's `prepare` / `backward` (`accelerator.backward(loss)`,
`self.accelerator.prepare(...)`) is *migrated code*. Its authors wrote what they meant:
`model.to(accelerator.device)` before the optimizer exists, plain `print`s, their own saves,
EMA models and trackers beside the optimizer. No rule rewrites it and no analysis finding is
reported for it.

The one thing completed is a half-migrated step: a plain `<expr>.backward(...)` inside a loop
over a loader the module itself prepared (`train_dl = accelerator.prepare(...)` or one of
`accelerator.prepare`'s arguments), or a loop that steps an optimizer it prepared, becomes
`accelerator.backward(<expr>, ...)` — never a second Accelerator or prepare. `half_migrated_backward` finds those calls; the engine applies
MIG005's edit to them and nothing else.

Everything here is a few lookups in the module's index (`ModuleIndex`): no role analysis.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.patterns import (
    ACCELERATOR_CLASSES,
    is_accelerator_call,
    loader_base,
)
from migrator.analysis.syntax.index import CallSite, ModuleIndex
from migrator.analysis.syntax.views import name_of

TARGET_PACKAGES = ("accelerate", "runtime")  # where an imported Accelerator comes from
ACCELERATOR_METHODS = ("prepare", "backward")


def is_accelerator_expr(expr: ast.expr | None, names: set[str]) -> bool:
    """`accelerator`, `self.accelerator`, `trainer.accelerator` or a name bound to an
    `Accelerator(...)` (`names`)."""
    name = name_of(expr) if expr is not None else None
    if name is None:
        return False
    return name in names or name.rsplit(".", 1)[-1] == "accelerator"


def accelerator_names(index: ModuleIndex) -> set[str]:
    """Names bound to `Accelerator(...)` anywhere in the module."""
    names = set()
    for scope in index.scopes:
        for name, bindings in scope.bindings.items():
            for binding in bindings:
                value = binding.value
                if isinstance(value, ast.Call) and is_accelerator_call(value, index.imports):
                    names.add(name)
    return names


def is_on_target(index: ModuleIndex) -> bool:
    """Does the module import or create an Accelerator, or call an accelerator's
    prepare/backward?"""
    for full in index.imports.aliases.values():
        package, _, last = full.rpartition(".")
        if last in ACCELERATOR_CLASSES and package.split(".")[0] in TARGET_PACKAGES:
            return True
    names = accelerator_names(index)
    if names:
        return True
    return any(
        site.method in ACCELERATOR_METHODS and is_accelerator_expr(site.receiver, names)
        for site in index.calls()
    )


def half_migrated_backward(index: ModuleIndex) -> list[tuple[CallSite, str]]:
    """Plain `<expr>.backward(...)` calls inside a loop over a loader (or stepping an
    optimizer) that an `accelerator.prepare(...)` call of this module prepared, in the function of that prepare
    call or one nested in it; each with the accelerator's code as that prepare call spells it."""
    names = accelerator_names(index)
    prepared: dict[str, list[CallSite]] = {}  # prepared name -> the prepare calls
    for site in index.calls():
        if site.method != "prepare" or not is_accelerator_expr(site.receiver, names):
            continue
        found_names = [name_of(arg) for arg in site.node.args]
        small = site.small
        if isinstance(small, ast.Assign) and small.value is site.node:
            for target in small.targets:
                elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                found_names += map(name_of, elements)
        for name in found_names:
            if name is not None:
                prepared.setdefault(name, []).append(site)
    if not prepared:
        return []
    found = []
    for site in index.calls():
        if site.method != "backward" or is_accelerator_expr(site.receiver, names):
            continue
        if not isinstance(site.node.func, ast.Attribute) or site.receiver is None:
            continue
        loop = site.loop
        while loop is not None:
            loader, _ = loader_base(loop.iter, index.imports)
            stepped = [
                name_of(call.receiver) for call in loop.calls if call.method == "step"
            ]  # a prepared optimizer stepping in the loop makes it a training loop too
            preparing = [
                p
                for name in [loader, *stepped]
                for p in prepared.get(name, ())
                if _sees(site.scope, p)
            ]
            if preparing:
                found.append((site, index.source.text_of(preparing[0].receiver).strip()))
                break
            loop = loop.parent
    return found


def _sees(scope, prepare: CallSite) -> bool:
    """Code in `scope` sees the accelerator of `prepare`: in its function or a nested one, or
    `self.<name>` in another method of the same class."""
    outer = prepare.scope
    receiver = name_of(prepare.receiver) or ""
    in_class = outer.parent is not None and outer.parent.kind == "class"
    if receiver.startswith("self.") and in_class and scope.parent is outer.parent:
        return True
    return scope.within(outer)
