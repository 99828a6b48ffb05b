"""MIG010's collectives left as the original wrote them (`dist.broadcast_object_list(ids,
src=0)`): the Accelerator's process group runs them on N processes, but on one it starts no
process group, and a bare collective raises there. One whose skipping is exact on one
process (a broadcast, an all-reduce of one process's values, a barrier), as a statement of
its own, runs where there are other processes: `if accelerator.num_processes > 1:`.
"""

from __future__ import annotations

import ast

from migrator.analysis.syntax.index import CallSite, Line
from migrator.findings import Finding
from migrator.rules.base import RuleContext
from migrator.rules.main_process_writes import indented

# collectives that leave one process's values as they are
NEUTRAL_ALONE = {"broadcast", "broadcast_object_list", "all_reduce", "barrier"}


def guard_alone(context: RuleContext, site: CallSite) -> bool:
    """Guard the collective (module docstring); whether it was."""
    func = site.node.func
    if not isinstance(func, ast.Attribute) or func.attr not in NEUTRAL_ALONE:
        return False
    small, line = site.small, site.statement.node
    if not (isinstance(small, ast.Expr) and small.value is site.node):
        return False
    if not (isinstance(line, Line) and len(line.body) == 1):
        return False
    if site.statement.block.kind == "suite":
        return False
    flag = context.accelerator_expr("num_processes")
    context.edits.replace(line, indented(context, site.statement, f"if {flag} > 1:"))
    context.need_accelerator_at(site.statement)
    context.findings.append(Finding(code="MIG909", level="note", node=site.node, message=(
        f"`{context.source.text_of(func)}(...)` runs where there are other processes (`if "
        f"{flag} > 1:`): on one the Accelerator starts no process group, and the call would "
        "leave the values as they are")))  # fmt: skip
    return True
