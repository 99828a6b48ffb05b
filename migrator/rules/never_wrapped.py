"""MIG010 on a hand-written DDP program that never wraps its model in DistributedDataParallel
(a process group, a DistributedSampler, each process stepping its own copy): `prepare` wraps
the model, which changes what the program trains, and the note says so."""

from __future__ import annotations

from migrator.analysis.model.chains import module_alias
from migrator.findings import Finding
from migrator.rules.base import RuleContext


def never_wrapped(context: RuleContext) -> None:
    """A process group and a model never wrapped in DistributedDataParallel: each process
    trained a copy of its own on its shard. `prepare` wraps the model, and the processes now
    train one model on their gradients' average: said, as the change it is."""
    dist = context.facts.distributed
    if dist.wraps or not context.facts.models or not context.facts.training_loops:
        return
    if not any(context.prepared(name) for name in context.facts.models):
        return
    node = context.facts.training_loops[0].node
    context.findings.append(Finding(code="MIG010", level="note", node=node, message=(
        "the original sets up its processes but never wraps its model in "
        "DistributedDataParallel: each process trained a copy of its own on its share of the "
        "data, the copies apart; prepared, the model is wrapped in DDP and the processes "
        "train one model on their averaged gradients (the usual data-parallel training)")))  # fmt: skip


def trained_past_the_wrap(context: RuleContext) -> None:
    """The training forward runs the module inside the DDP wrapper (`raw_model =
    model.module if ddp else model`, then `raw_model(x)`): DDP averages gradients only for a
    backward that follows its own forward, so each process of the original trained a copy of
    its own. Prepared, the model the loop runs is wrapped and averaged: said, as above."""
    dist = context.facts.distributed
    for wrap in dist.wraps:
        scope = wrap.site.scope
        for name in context.facts.models:
            if not context.prepared(name):
                continue
            binding = next((b for b in scope.assigns(name)
                            if module_alias(b.value) == (wrap.target, True)), None)  # fmt: skip
            if binding is None:
                continue
            context.findings.append(Finding(code="MIG010", level="note", node=binding.value,
                message=(
                f"the original trained `{name}`, the model inside `{wrap.target}`'s "
                f"DistributedDataParallel (line {wrap.site.node.lineno}): a forward that "
                "skips the wrapper leaves DDP's gradient averaging out, so each process "
                f"trained a copy of its own; prepared, `{name}` is wrapped and the processes "
                "train one model on their averaged gradients")))  # fmt: skip
            return
