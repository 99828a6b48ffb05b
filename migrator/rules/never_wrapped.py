"""MIG010 on a hand-written DDP program that never wraps its model in DistributedDataParallel
(a process group, a DistributedSampler, each process stepping its own copy): `prepare` wraps
the model, which changes what the program trains, and the note says so."""

from __future__ import annotations

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
