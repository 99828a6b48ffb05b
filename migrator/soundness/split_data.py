"""Obligation 6, randomness that must agree: a loader prepared from data each process drew
for itself. Where the program splits its data with an RNG no seed makes alike (a
`random_split(dataset, [n, m])` of a project helper, `load_mnist()` returning the loaders it
split), each process holds its own split: the samples one process trains on are another's
test samples, and some are never trained on (h11 review: a helper module's unseeded split).
A loader is what the analysis found one (training or evaluation); a model made from
per-process draws is not refused (DistributedDataParallel copies the main process's
weights to the others when it wraps them).
"""

from __future__ import annotations

import ast

from migrator.analysis.effects.extents import LOCAL
from migrator.findings import Finding
from migrator.soundness.model import OutputModel

CODE = "MIG953"


def split_per_process(model: OutputModel) -> list[Finding]:
    values = model.values()
    loaders = {name for name, role in model.roles.items() if role == "loader"}
    found = []
    for site in model.accelerator_calls({"prepare"}):
        for argument in site.node.args:
            name = model.source.text_of(argument).strip()
            if name not in loaders or LOCAL not in values.extents(argument, site.scope):
                continue
            drawn = _drawn_by(model, site.scope, argument)
            found.append(Finding(code=CODE, node=argument, message=(
                f"`{name}` is made from this process's own random draws ({drawn}): each "
                "process would hold its own split, and "
                "train on samples another holds out; seed the split alike (`generator=torch."
                "Generator().manual_seed(0)`, `random_state=0`), by hand")))  # fmt: skip
    return found


def _drawn_by(model: OutputModel, scope, argument: ast.expr) -> str:
    """`load_mnist()` draws with `torch.utils.data.random_split`, where a helper of the
    program makes it; else what is said of every such split."""
    imports = model.index.imports
    name = argument.id if isinstance(argument, ast.Name) else None
    for binding in scope.assigns(name) if name else []:
        call = binding.value if isinstance(binding.value, ast.Call) else None
        qualified = imports.qualify(call.func) if call is not None else None
        drawn = imports.helper_draws.get(qualified) if qualified else None
        if drawn is not None:
            return f"`{model.source.text_of(call.func)}()` draws with `{drawn.draw}`"
    return "a split no seed makes alike on every process"
