"""MIG030's waits: `accelerator.wait_for_everyone()` before every process reads a file the
main process alone now writes (`torch.load(path)` after `accelerator.save(..., path)`, in any
function of the program or a helper module it imports), and after a main-only
`shutil.rmtree(d)` that every process then writes into again; which statements those are is
the analysis's (analysis/effects/shared_files.py). A barrier already there (the script's own,
MIG006's before a re-created model) is not doubled.
"""

from __future__ import annotations

import ast

from migrator.analysis.effects.shared_files import FileFlow
from migrator.analysis.syntax.index import Line, Statement
from migrator.rules.base import RuleContext
from migrator.rules.main_process_writes import guarded_helper

WAIT = "wait_for_everyone()"


def wait_for_shared_files(context: RuleContext, waited: set[int]) -> None:
    """Register the waits (module docstring); `waited`: ids of reads already waited for."""
    flow = FileFlow(context.facts.index, context.source, context.processes, context.library,
                    lambda site: guarded_helper(context, site))  # fmt: skip
    for statement in flow.read_statements(waited):
        _wait_before(context, statement)
    for statement in flow.removal_statements():
        _wait_before(context, statement, after=True)


def _wait_before(context: RuleContext, statement: Statement, after: bool = False) -> None:
    block = statement.block
    index = statement.index + (1 if after else 0)
    if block.kind == "suite" or _waits_near(context, block, index):
        return
    if context.processes.in_rank_branch(statement):
        return  # not every process reaches it (`else:` of a main-process test): never a wait
    if _per_item(context, statement.block.scope):
        return  # a collate_fn, a Dataset's __getitem__: a barrier per batch, or in a worker
    code = f"{context.accelerator}.{WAIT}\n"
    inserted = context.statement(code)
    context.edits.insert(block, index, inserted, priority=30)

    def through_state() -> None:  # where no accelerator can be seen: the process-wide state's
        context.edits.withdraw(block, index, inserted)
        waiting = context.statement(f"{context.state_expr('wait_for_everyone')}()\n")
        context.edits.insert(block, index, waiting, priority=30)

    context.need_accelerator_before(block, index, f"accelerator.{WAIT}", fallback=through_state)


ITEM_METHODS = {"__getitem__", "__iter__", "__next__", "__len__", "__call__"}


def _per_item(context: RuleContext, scope) -> bool:
    """Code a loader runs per sample or per batch, maybe in a worker process: a Dataset's
    `__getitem__`, or a function handed over as a value (`collate_fn=pad_collate`,
    `worker_init_fn=...`), or called in a loop. A barrier there would meet the others once
    per batch, or never (a worker has no process group)."""
    if scope.kind != "function":
        return False
    if scope.name in ITEM_METHODS:
        return True
    holder = scope.parent
    while holder is not None and holder.kind == "class":
        holder = holder.parent
    for seen in [holder, *holder.descendants()] if holder is not None else []:
        if any(use.kind != "call" for use in seen.uses.get(scope.name, [])):
            return True
    return any(
        isinstance(s.node, (ast.For, ast.AsyncFor, ast.While))
        for site in context.facts.index.calls_named(scope.name)
        for s in site.statement.chain()[:-1]
    )


def _waits_near(context: RuleContext, block, index: int) -> bool:
    """A barrier right before `index` or at it already (the script's own, or one MIG006 or
    another wait put there)."""
    plan = context.plan
    if any(b is block and i == index for _name, b, i in plan.reloaded):
        return True
    if any(b is block and i == index for b, i in plan.waits):
        return True
    for position in (index - 1, index):
        if 0 <= position < len(block.statements):
            node = block.statements[position]
            text = context.source.text_of(node.body[0] if isinstance(node, Line) else node)
            if "barrier(" in text or "wait_for_everyone(" in text:
                return True
    inserted = context.edits.insertions.get((id(block), index), [])
    return any(WAIT in statement.code for _priority, statement in inserted)
