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
        self._name_inline_loaders(context)
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

    def _name_inline_loaders(self, context: RuleContext) -> None:
        """`for b in enumerate(DataLoader(ds, ...)):` -> `train_loader = accelerator.prepare(
        DataLoader(ds, ...))` before the statement, and the loop iterates `train_loader`."""
        taken = {name for scope in context.facts.index.scopes
                 for name in [*scope.bindings, *scope.uses, *scope.params]}  # fmt: skip
        for call, statement in context.facts.inline_loaders:
            name = next(n for n in _loader_names() if n not in taken)
            taken.add(name)
            text = context.source.text_of(call)
            code = f"{name} = {context.accelerator}.prepare({text})\n"
            context.edits.insert(statement.block.holder, statement.index,
                                 context.statement(code), priority=10)  # fmt: skip
            context.edits.replace_with(call, name)
            context.need_accelerator_before(statement.block, statement.index)


def _loader_names():
    yield from ("train_loader", "train_dataloader", "loader")
    count = 1
    while True:
        yield f"train_loader_{count}"
        count += 1


def _depth(block) -> int:
    depth = len(block.parent.chain()) if block.parent is not None else 0
    scope = block.scope
    while scope.parent is not None:
        depth += 1
        scope = scope.parent
    return depth
