"""Obligation 2: every side effect that runs on every process — through helpers, methods and
classes of the program, at any depth — runs on the main process only, or is made safe.

The side effects are the catalogue's (analysis/catalogue/effects.py); where code runs is
analysis/effects/processes.py. A download inside `with accelerator.main_process_first():` is
made safe (the main process downloads first, the others find the files).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.effects import MAIN_FIRST, effect_of, values_in
from migrator.findings import Finding
from migrator.soundness.model import OutputModel

CODE = "MIG952"


def side_effects(model: OutputModel) -> list[Finding]:
    found = []
    imports = model.index.imports
    for site in model.index.calls():
        effect = effect_of(site.node, imports, values_in(site.scope))
        if effect is None or not model.processes.runs_on_every_process(site.statement):
            continue
        if effect.kind == "download" and _main_first(site.statement):
            continue
        call = model.source.text_of(site.node.func).strip()
        found.append(Finding(code=CODE, node=site.node, message=(
            f"`{call}(...)` ({effect.what}) {model.where(site.statement)} would run on every "
            "process: each would write it; run it on the main process only "
            "(`if accelerator.is_main_process:`), by hand"
        )))  # fmt: skip
    return found


def _main_first(statement) -> bool:
    for outer in statement.chain()[:-1]:
        node = outer.node
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
            isinstance(item.context_expr, ast.Call)
            and getattr(item.context_expr.func, "attr", None) == MAIN_FIRST
            for item in node.items
        ):
            return True
    return False
