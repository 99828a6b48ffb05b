"""MIG002, inside the model: plain tensors a trained model's class places itself
(`self.A_hat = torch.tensor(adj).cuda()` in `__init__`, `torch.ones(n, device="cuda")` in
`forward`) are not buffers, so prepare does not move them; they must land on the device prepare
puts the model on. `.cuda()` and device literals there become `accelerator.device`
(model_classes.py says which classes); a module-level device variable they read is already
`accelerator.device` (`_device_variables`).

The model is built where the Accelerator may not exist yet (a Trainer that makes it in its own
`__init__` and is handed the model, module code before the Accelerator's arguments are known):
then every such placement reads the process-wide state, `PartialState().device`, which is
this process's device whenever it is asked (each process's GPU; `cuda` alone would be GPU 0
for a model built before the Accelerator picked the process's own).
"""

from __future__ import annotations

from migrator.analysis.catalogue import patterns
from migrator.analysis.roles.model_classes import constructions
from migrator.analysis.syntax.views import call_args
from migrator.arglists import call_items
from migrator.rules.base import RuleContext

STATE_DEVICE = "PartialState().device"


def model_tensors(context: RuleContext) -> None:
    facts = context.facts
    imports = facts.index.imports
    choice = {"code": context.accelerator_expr("device")}
    sites = []
    for scope in facts.model_methods:
        devices = facts.device_names(scope)
        for site in scope.calls:
            call = site.node
            if context.edits.has_replacement(call):
                continue
            kind = patterns.placement_call(call, devices, imports)
            if kind == "cuda":
                context.edits.rewrite(call, _cuda_to(call, choice), drops=[call])
                sites.append(site)
                continue
            for position, arg in enumerate(call_args(call)):
                value = arg.value
                positional = kind == "to" and arg.keyword is None and position == 0
                if not (arg.keyword == "device" or positional):
                    continue
                if not patterns.is_device_constructor(value, imports) or _pinned(value, imports):
                    continue
                context.edits.replace(value, lambda _t, _r: choice["code"], drops=[value])
                sites.append(site)
    if not sites:
        return

    def through_state() -> None:  # one placement cannot see the accelerator: none reads it
        choice["code"] = STATE_DEVICE
        if "PartialState" not in context.accelerator_imports:
            context.accelerator_imports.append("PartialState")

    statements = [site.statement for site in sites]
    statements += constructions(facts)
    for statement in statements:
        context.need_accelerator_at(statement, fallback=through_state)


def _pinned(value, imports) -> bool:
    """`"cpu"` (a host tensor on purpose) or `"cuda:1"` (an index: MIG902): not retargeted."""
    return (
        patterns.is_cpu_device(value, imports)
        or patterns.has_explicit_index(value)
        or (
            len(getattr(value, "args", ())) > 1  # torch.device("cuda", 1)
        )
    )


def _cuda_to(call, choice: dict):
    """`x.cuda(...)` -> `x.to(<device>)`, whitespace inside the brackets kept."""

    def rewrite(_text: str, renderer) -> str:
        source = renderer.source
        func = call.func
        receiver_end = source.own_span(func.value)[1]
        name_start = source.end(func) - len(func.attr)
        func_text = renderer.text_of(func.value) + source.text[receiver_end:name_start] + "to"
        items = call_items(renderer, call, func_text=func_text)
        return items.head + items.lead + choice["code"] + ")"

    return rewrite
