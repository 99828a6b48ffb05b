"""MIG010 on ranks kept on `args` (analysis: migrator/analysis/launch_attributes.py): every
write of `args.gpu` / `args.rank` / `args.world_size` / `args.distributed` / `args.local_rank`
goes (the launcher decides them now), every read becomes the accelerator's value. A part of
mig010_native_ddp.py's migration, kept in its own module for size."""

from __future__ import annotations

import ast

from migrator.analysis.distributed.facts import LOCAL_PROCESS_INDEX, NUM_PROCESSES, PROCESS_INDEX
from migrator.analysis.distributed.launch_attributes import DISTRIBUTED

# Parents under which `accelerator.num_processes > 1` reads right without parentheses.
BARE = (ast.If, ast.IfExp, ast.While, ast.BoolOp, ast.Assign, ast.Assert, ast.keyword, ast.Return)


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
        if kind == PROCESS_INDEX and _first_of_node(migration, attribute, statement):
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
    for attribute, statement, kind in launch.reads:
        if kind == DISTRIBUTED:
            _only_when_distributed(migration, attribute, launch)


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


def _first_of_node(migration, attribute: ast.Attribute, statement) -> bool:
    """`args.rank % ngpus_per_node == 0` (the first process of each node saves) ->
    `accelerator.is_main_process`; `!= 0` -> `not accelerator.is_main_process`."""
    modulo = migration.parents.get(id(attribute))
    comparison = migration.parents.get(id(modulo))
    if not (
        isinstance(modulo, ast.BinOp)
        and isinstance(modulo.op, ast.Mod)
        and modulo.left is attribute
        and isinstance(comparison, ast.Compare)
        and len(comparison.ops) == 1
        and comparison.left is modulo
        and isinstance(comparison.ops[0], (ast.Eq, ast.NotEq))
        and isinstance(comparison.comparators[0], ast.Constant)
        and comparison.comparators[0].value == 0
    ):
        return False
    divisor = modulo.right
    scope = statement.block.scope
    if not isinstance(divisor, ast.Name) or migration.facts.rank_kind(scope, divisor.id) != (
        NUM_PROCESSES
    ):  # fmt: skip
        return False
    flag = migration.context.accelerator_expr("is_main_process")
    if isinstance(comparison.ops[0], ast.NotEq):
        flag = f"not {flag}"
    migration.edits.rewrite(comparison, lambda _t, _r, f=flag: f, drops=[comparison])
    migration.context.need_accelerator_at(statement)
    return True


def _only_when_distributed(migration, attribute: ast.Attribute, launch) -> None:
    """`not args.distributed or (args.distributed and CHECK)` -> `CHECK`: one process, or the
    chosen one of several, is what CHECK alone says once the launcher decides."""
    negation = migration.parents.get(id(attribute))
    either = migration.parents.get(id(negation))
    if not (
        isinstance(negation, ast.UnaryOp)
        and isinstance(negation.op, ast.Not)
        and isinstance(either, ast.BoolOp)
        and isinstance(either.op, ast.Or)
        and len(either.values) == 2
        and either.values[0] is negation
    ):
        return
    both = either.values[1]
    if not (
        isinstance(both, ast.BoolOp)
        and isinstance(both.op, ast.And)
        and len(both.values) == 2
        and launch.covers(both.values[0])
        and both.values[0].attr == attribute.attr
    ):
        return
    check = both.values[1]
    if not migration.edits.has_replacement(check):
        return  # CHECK did not become the accelerator's own test: leave the expression
    migration.edits.replace(
        either, lambda _t, r: r.text_of(check, parens=False), drops=[negation, both.values[0]]
    )
