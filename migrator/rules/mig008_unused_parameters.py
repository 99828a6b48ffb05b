"""MIG008 unused parameters: a prepared model whose forward may leave parameters without a
gradient (analysis/roles/unused_parameters.py) is wrapped with
`find_unused_parameters=True`: `Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(
find_unused_parameters=True)])`, as HF Accelerate spells it, with a note naming them. Without
it DistributedDataParallel fails at the second step on every process count above one."""

from __future__ import annotations

from migrator.analysis.model.calls import CallGraph
from migrator.analysis.roles.unused_parameters import unused_parameters
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.ddp_options import HANDLER


class UnusedParameters(Rule):
    code = "MIG008"
    name = "unused-parameters"
    summary = "find_unused_parameters=True for a model whose forward may skip parameters"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        found = [
            u for u in unused_parameters(context.facts, CallGraph(context.facts.index))
            if context.prepared(u.model)
        ]  # fmt: skip
        if not found:
            return
        handlers = next((k for k in context.kwargs if k.name == "kwargs_handlers"), None)
        if handlers is not None and "find_unused_parameters=True" not in handlers.code:
            context.block_file(Finding(code="MIG008", node=found[0].node, message=(
                f"`{found[0].model}` may leave parameters unused ({_listed(found[0])}), which "
                "DDP needs find_unused_parameters=True for, beside other DDP options; set "
                "them together by hand")))  # fmt: skip
            return
        if handlers is None:
            context.add_kwarg("kwargs_handlers", f"[{HANDLER}(find_unused_parameters=True)]")
            if HANDLER not in context.accelerator_imports:
                context.accelerator_imports.append(HANDLER)
        for unused in found:
            context.findings.append(Finding(code="MIG008", level="note", node=unused.node, message=(
                f"`{unused.model}` ({unused.cls}) may leave parameters without a gradient "
                f"({_listed(unused)}: {unused.why}): DDP is "
                "made with find_unused_parameters=True, which finds them at every step")))  # fmt: skip


def _listed(unused) -> str:
    return ", ".join(f"`{a}`" for a in unused.attributes)
