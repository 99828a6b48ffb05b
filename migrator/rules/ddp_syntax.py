"""Syntax helpers for MIG010: parent links, comparisons with rank 0, dropping arguments and
parameters, names a scope still sees. No facts, no edits."""

from __future__ import annotations

import libcst as cst


def main_process_check(node: cst.CSTNode, parents: dict):
    """(comparison, negated) for `rank == 0`, `0 == rank`, `rank != 0`, `rank > 0`."""
    parent = parents.get(id(node))
    if isinstance(parent, cst.Comparison) and parent.left is node:
        comparison, other, flipped = parent, None, False
    elif isinstance(parent, cst.ComparisonTarget) and parent.comparator is node:
        comparison, other, flipped = parents.get(id(parent)), None, True
    else:
        return None
    if not isinstance(comparison, cst.Comparison) or len(comparison.comparisons) != 1:
        return None
    target = comparison.comparisons[0]
    other = comparison.left if flipped else target.comparator
    if not isinstance(other, cst.Integer) or other.value != "0":
        return None
    operator = target.operator
    if isinstance(operator, cst.Equal):
        return comparison, False
    greater = cst.LessThan if flipped else cst.GreaterThan
    if isinstance(operator, (cst.NotEqual, greater)):
        return comparison, True
    return None


def without_args(call: cst.CSTNode, positions: set[int]) -> cst.CSTNode:
    if not isinstance(call, cst.Call) or not positions:
        return call
    args = [a for i, a in enumerate(call.args) if i not in positions]
    last = call.args[-1]
    if args and args[-1] is not last:
        args[-1] = args[-1].with_changes(
            comma=last.comma, whitespace_after_arg=last.whitespace_after_arg
        )
    return call.with_changes(args=args)


def without_params(params: cst.CSTNode, positions: set[int]) -> cst.CSTNode:
    if not isinstance(params, cst.Parameters):
        return params
    first = len(params.posonly_params)
    posonly = [p for i, p in enumerate(params.posonly_params) if i not in positions]
    kept = [p for i, p in enumerate(params.params, start=first) if i not in positions]
    nothing_after = params.star_arg is cst.MaybeSentinel.DEFAULT and not params.kwonly_params \
        and params.star_kwarg is None  # fmt: skip
    if kept and params.params and kept[-1] is not params.params[-1] and nothing_after:
        kept[-1] = kept[-1].with_changes(comma=params.params[-1].comma)
    return params.with_changes(params=kept, posonly_params=posonly)


def name_ids(node: cst.CSTNode) -> set[int]:
    found: set[int] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(id(name))

    node.visit(_Names())
    return found


def parents_of(module: cst.Module) -> dict[int, cst.CSTNode]:
    parents: dict[int, cst.CSTNode] = {}

    class _Parents(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            if self.stack:
                parents[id(node)] = self.stack[-1]
            self.stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            self.stack.pop()

    module.visit(_Parents())
    return parents


class NoImports:
    def qualify(self, node):
        return None
