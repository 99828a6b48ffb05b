"""MIG002's device chosen outside the Trainer class that owns the accelerator (SPEC §3b.5,
issue 27 rule 5): the entry's `device = torch.device(...)` only shown, used to place the model it
hands over, and handed to the Trainer's constructor needs no accelerator of its own. The
Trainer reads `self.accelerator.device` where it used the device; the entry's variable stays
as written (the entry cannot see the Trainer's accelerator), and its placements of the model
go (prepare places it)."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import argument_for, class_methods, is_method, visible_scopes
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Line, Scope
from migrator.analysis.syntax.views import contains
from migrator.rules.base import RuleContext


def only_for_the_trainer(context: RuleContext, scope: Scope, name: str) -> list | None:
    """`device` chosen outside the Trainer class that owns the accelerator and only handed to
    its constructor (`Trainer(device, model, loader)`), whose parameter then only feeds what
    becomes `self.accelerator.device` or goes (`self.device = torch.device(device)`,
    `model.to(device)`): the driver's variable stays as written; the Trainer no longer reads it
    and the driver cannot see the Trainer's accelerator. The driver may place the model it
    hands to the Trainer on it first (`model.to(device)`; the Trainer's prepare places it):
    those placements (call sites) go. None when the variable has other uses."""
    facts = context.facts
    owner = facts.owner
    if not is_method(owner) or scope.within(owner.parent):
        return None
    init = next((m for m in class_methods(owner) if m.name == "__init__"), None)
    if init is None:
        return None
    replaced = [b.value for b in facts.device_bindings if b.statement.block.scope is init]
    dropped = context.edits.dropped_names
    placements, handed = [], set()
    for current in visible_scopes(scope, name):
        for use in current.uses.get(name, []):
            if id(use.node) in dropped:
                continue
            placed = _placement(current, use)
            if placed is not None:
                placements.append(placed)
                continue
            if _shown(use):  # `logger.info(f"Device: {device}")`: the original's choice, shown
                continue
            if use.kind != "arg" or dotted_name(use.call.func) != owner.parent.name:
                return None
            handed.update(_names_handed(use.call))
            param = next(
                (p for p in init.params if argument_for(use.call, init, p) is use.node), None
            )
            if param is None or any(b.kind != "param" for b in init.bindings.get(param, [])):
                return None
            for inner in visible_scopes(init, param):
                for read in inner.uses.get(param, []):
                    if id(read.node) in dropped or any(
                        value is not None and contains(value, read.node) for value in replaced
                    ):
                        continue
                    kept = _kept_model_placement(context, inner, read, owner)
                    if kept is None:
                        return None
                    placements.append((kept, None))
    if any(name is not None and name not in handed for _site, name in placements):
        return None  # a placement of something the Trainer is not given: the device is needed
    return [site for site, _name in placements]


def _placement(scope: Scope, use):
    """(call site, the name it places) if `use` is the device of `model.to(device)` (a
    statement of its own) or of `net = Net().to(device)` (what the name is bound to)."""
    if use.kind != "arg" or use.call is None or not isinstance(use.call.func, ast.Attribute):
        return None
    if use.call.func.attr not in ("to", "cuda"):
        return None
    site = next((c for c in scope.calls if c.node is use.call), None)
    small = site.small if site is not None else None
    if isinstance(small, ast.Expr) and small.value is use.call:
        name = patterns.name_of(use.call.func.value)
    elif isinstance(small, ast.Assign) and small.value is use.call and len(small.targets) == 1:
        name = patterns.name_of(small.targets[0])
    else:
        return None
    return (site, name) if name is not None else None


LOG_METHODS = {"info", "debug", "warning", "warn", "error", "critical", "log"}


def _shown(use) -> bool:
    """`use` is read by a line that only shows it: `print(...)`, `logger.info(...)`."""
    line = use.statement.node
    small = line.body[0] if isinstance(line, Line) and len(line.body) == 1 else None
    call = small.value if isinstance(small, ast.Expr) else None
    if not isinstance(call, ast.Call) or not contains(call, use.node):
        return False
    func = call.func
    return (isinstance(func, ast.Name) and func.id == "print") or (
        isinstance(func, ast.Attribute) and func.attr in LOG_METHODS
    )


def _kept_model_placement(context: RuleContext, scope: Scope, read, owner: Scope):
    """The call site of `model.to(device)` in `self.model = model.to(device)` (`read` its
    device), where `self.model` is the prepared model: prepare places it."""
    if read.kind != "arg" or read.call is None or not isinstance(read.call.func, ast.Attribute):
        return None
    site = next((c for c in scope.calls if c.node is read.call), None)
    small = site.small if site is not None else None
    if site is None or site.method not in ("to", "cuda") or not isinstance(small, ast.Assign):
        return None
    target = patterns.name_of(small.targets[0]) if len(small.targets) == 1 else None
    if small.value is not read.call or target is None:
        return None
    return site if context.prepared_role(owner, target) == "model" else None


def _names_handed(call: ast.Call) -> set[str]:
    """The plain names a constructor call passes."""
    values = [*call.args, *(k.value for k in call.keywords)]
    return {v.id for v in values if isinstance(v, ast.Name)}
