"""Obligation 4: every optimizer a migrated program steps is prepared. An optimizer the rules
did not reach (a second model's step in a helper they did not follow) trains its model on each
process apart - its gradients are never averaged across processes - while the rest of the
program trains one model: a half-migrated program, refused. (A step's `loss.backward()` left
as it is on a prepared model is sound: DDP averages its gradients; `accelerator.backward` is
what mixed precision and accumulation need, MIG005.)

The check reads the output: a `.step()` of a name (or attribute chain) bound to a
`torch.optim` optimizer, in a module that prepares anything, where that name is not among
what `accelerator.prepare(...)` returns.
"""

from __future__ import annotations

import ast

from migrator.analysis.model.chains import chain_text
from migrator.findings import Finding
from migrator.soundness.model import OutputModel

CODE = "MIG954"
OPTIMIZERS = "torch.optim."
SCHEDULERS = "torch.optim.lr_scheduler."


def escaped_steps(model: OutputModel) -> list[Finding]:
    calls = list(model.index.calls())
    prepared = _prepared(model)
    if not prepared:
        return []  # nothing migrated here (a helper module of the program)
    optimizers = _optimizers(model)
    found = []
    for site in calls:
        func = site.node.func
        if site.method != "step" or not isinstance(func, ast.Attribute):
            continue
        stepped = chain_text(func.value)
        if stepped is None or stepped not in optimizers or stepped in prepared:
            continue
        if model.processes.scope_status(site.scope) == "not run":
            continue
        call = model.source.text_of(site.node).strip()
        found.append(Finding(code=CODE, node=site.node, message=(
            f"`{call}` {model.where(site.statement)} steps `{stepped}`, which is not "
            "prepared: the tool did not migrate this training step, so each process would "
            "train its model apart while the rest of the program trains one model; migrate "
            "it by hand"
        )))  # fmt: skip
    return found


def _prepared(model: OutputModel) -> set[str]:
    """The names and chains `x, y = accelerator.prepare(...)` binds."""
    found: set[str] = set()
    for node in ast.walk(model.tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        func = node.value.func
        if not (isinstance(func, ast.Attribute) and func.attr == "prepare"):
            continue
        for target in node.targets:
            elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            found.update(text for e in elements if (text := chain_text(e)) is not None)
    return found


def _optimizers(model: OutputModel) -> set[str]:
    """Names and chains bound to a `torch.optim` optimizer (`opt = Adam(...)`, `self.g_opt =
    torch.optim.SGD(...)`), not a scheduler."""
    imports = model.index.imports
    found: set[str] = set()
    for node in ast.walk(model.tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        qualified = imports.qualify(node.value.func) or ""
        if not qualified.startswith(OPTIMIZERS) or qualified.startswith(SCHEDULERS):
            continue
        found.update(text for t in node.targets if (text := chain_text(t)) is not None)
    return found
