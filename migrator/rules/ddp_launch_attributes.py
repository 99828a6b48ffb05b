"""MIG010 on ranks kept on `args` (analysis: migrator/analysis/launch_attributes.py): every
write of `args.gpu` / `args.rank` / `args.world_size` / `args.distributed` / `args.local_rank`
goes (the launcher decides them now), every read becomes the accelerator's value. A part of
mig010_native_ddp.py's migration, kept in its own module for size."""

from __future__ import annotations

import ast

from migrator.analysis.distributed_facts import LOCAL_PROCESS_INDEX
from migrator.analysis.launch_attributes import DISTRIBUTED

# Parents under which `accelerator.num_processes > 1` reads right without parentheses.
BARE = (ast.If, ast.While, ast.BoolOp, ast.Assign, ast.Assert, ast.keyword, ast.Return)


def rewrite_launch_attributes(migration) -> None:
    launch = migration.dist.launch
    if launch is None or not launch.kinds:
        return
    for small, statement in launch.writes:
        migration._remove(small, statement)
    context = migration.context
    for attribute, statement, kind in launch.reads:
        if kind == LOCAL_PROCESS_INDEX and _device_given(migration, attribute, statement):
            continue
        if kind != DISTRIBUTED:
            migration._rank_use(attribute, statement, kind, by_value=True)
            continue
        code = f"{context.accelerator_expr('num_processes')} > 1"
        parent = migration.parents.get(id(attribute))
        negated = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)
        if not isinstance(parent, BARE) and not negated:
            code = f"({code})"
        migration.edits.replace_with(attribute, code)
        context.need_accelerator_at(statement)


def _device_given(migration, attribute: ast.Attribute, statement) -> bool:
    """`args.gpu is not None` ("this process has its own GPU") -> `accelerator.device.type !=
    "cpu"`, `args.gpu is None` -> `== "cpu"`: the launcher gives every process its device."""
    comparison = migration.parents.get(id(attribute))
    if not (
        isinstance(comparison, ast.Compare)
        and len(comparison.ops) == 1
        and comparison.left is attribute
        and isinstance(comparison.ops[0], (ast.Is, ast.IsNot))
        and isinstance(comparison.comparators[0], ast.Constant)
        and comparison.comparators[0].value is None
    ):
        return False
    if id(attribute) in migration.edits.dropped_names or migration.edits.has_replacement(
        comparison
    ):
        return True
    operator = "!=" if isinstance(comparison.ops[0], ast.IsNot) else "=="
    code = f'{migration.context.accelerator_expr("device")}.type {operator} "cpu"'
    migration.edits.rewrite(comparison, lambda _t, _r, c=code: c, drops=[comparison])
    migration.context.need_accelerator_at(statement)
    node = statement.node  # `if args.gpu is not None:` around placements that went: goes too
    if isinstance(node, ast.If) and node.test is comparison and not migration._has_elif(node):
        migration.edits.drop_if_emptied.add(id(node))
    return True
