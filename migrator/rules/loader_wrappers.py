"""A DataLoader re-bound to the user's own wrapper before training
(`loader = WrappedDataLoader(loader, to_device)`, whose `__iter__` yields `fn(*batch)`):
`accelerator.prepare` would get the wrapper, which it passes through as it is, so nothing is
sharded and every process trains on all the data (and a gathered metric counts each sample N
times), with no error. MIG006 refuses the file and names both lines: the DataLoader has to be
prepared before it is wrapped."""

from __future__ import annotations

import ast

from migrator.analysis import patterns
from migrator.analysis.index import Scope
from migrator.findings import Finding
from migrator.rules.base import RuleContext


def rewrapped_loader(context: RuleContext, scope: Scope, names: list[str]) -> Finding | None:
    imports = context.facts.index.imports
    for name in names:
        if context.role(scope, name) != "loader":
            continue
        made = None  # the line that builds the DataLoader
        for binding in sorted(scope.assigns(name), key=lambda b: b.small.lineno if b.small else 0):
            call = binding.value if not binding.unpacked else None
            if not isinstance(call, ast.Call):
                continue
            if patterns.is_loader_call(call, imports):
                made = binding.small
                continue
            takes_loader = any(
                isinstance(arg, ast.Name) and arg.id == name
                for arg in [*call.args, *(k.value for k in call.keywords)]
            )
            if made is not None and takes_loader:
                wrapper = context.source.text_of(call.func)
                return Finding(
                    code="MIG900",
                    node=binding.small,
                    message=f"`{name}` (the DataLoader made at line {made.lineno}) is re-bound "
                    f"to `{wrapper}(...)` at line {binding.small.lineno}, which "
                    "`accelerator.prepare` would pass through unsharded: every process would "
                    f"train on all the data; prepare the DataLoader before line "
                    f"{binding.small.lineno} and wrap the prepared one, by hand",
                )
    return None
