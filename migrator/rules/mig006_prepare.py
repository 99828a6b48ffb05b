"""MIG006 prepare: one `a, b, c = accelerator.prepare(a, b, c)` after the last definition of the
prepared objects and before their first use, in the seeds' order (models, optimizers, loaders,
schedulers). Where it goes and what it holds is decided by the analysis (placement.py)."""

from __future__ import annotations

from migrator.rules.base import Rule, RuleContext

LINE_LENGTH = 88


class Prepare(Rule):
    code = "MIG006"
    name = "prepare"
    summary = "one accelerator.prepare(model, optimizer, loaders, scheduler) before first use"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        plan = context.plan
        context.findings.extend(plan.notes)
        for name, block, index in plan.early:  # a loader a wrapper takes before the others exist
            code = f"{name} = {context.accelerator}.prepare({name})\n"
            context.edits.insert(block.holder, index, context.statement(code), priority=10)
            context.need_accelerator_before(block, index)
        if not plan.objects or plan.block is None:
            return
        names = ", ".join(plan.objects)
        call = f"{context.accelerator}.prepare"
        indent = "    " * _depth(plan.block)
        one_line = f"{names} = {call}({names})"
        if len(indent) + len(one_line) <= LINE_LENGTH:
            code = one_line + "\n"
        else:
            code = f"{names} = {call}(\n    {names}\n)\n"
        at_block_start = plan.index == 0 and plan.block.parent is not None
        at_block_start = at_block_start or (plan.index == 0 and plan.block.scope.kind != "module")
        statement = context.statement(code, blank_line_before=not at_block_start)
        context.edits.insert(plan.block.holder, plan.index, statement, priority=10)
        for index in sorted({index for _name, _block, index in plan.reloaded}):
            # the re-created model loads what the main process saved: every process waits
            code = f"{context.accelerator}.wait_for_everyone()\n"
            context.edits.insert(plan.block.holder, index, context.statement(code), priority=10)
        context.need_accelerator_before(plan.block, plan.index)


def _depth(block) -> int:
    depth = len(block.parent.chain()) if block.parent is not None else 0
    scope = block.scope
    while scope.parent is not None:
        depth += 1
        scope = scope.parent
    return depth
