"""Syntax helpers for MIG010: parent links, comparisons with rank 0, dropping arguments and
parameters. No facts, no edits."""

from __future__ import annotations

import ast

from migrator.analysis.syntax.views import integer_text
from migrator.arglists import Item, ItemList


def main_process_check(node: ast.AST, parents: dict, source):
    """(comparison, negated) for `rank == 0`, `0 == rank`, `rank != 0`, `rank > 0`."""
    comparison = parents.get(id(node))
    if not isinstance(comparison, ast.Compare) or len(comparison.ops) != 1:
        return None
    if comparison.left is node:
        flipped = False
    elif comparison.comparators[0] is node:
        flipped = True
    else:
        return None
    other = comparison.left if flipped else comparison.comparators[0]
    if integer_text(source, other) != "0":
        return None
    operator = comparison.ops[0]
    if isinstance(operator, ast.Eq):
        return comparison, False
    greater = ast.Lt if flipped else ast.Gt
    if isinstance(operator, (ast.NotEq, greater)):
        return comparison, True
    return None


def without_params(items: ItemList, function, positions: set[int]) -> ItemList:
    """A `def`'s parameters without the positional ones at `positions` (counted over the
    positional-only and the ordinary parameters); a new last ordinary parameter takes the old
    last's comma when nothing follows it."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    removed = {id(positional[i]) for i in positions if i < len(positional)}
    if not removed:
        return items
    ordinary = arguments.args
    kept = [item for item in items.items if id(item.node) not in removed]
    last = ordinary[-1] if ordinary else None
    after_last = [
        item for item in items.items[_position(items, last) + 1 :] if last is not None
    ]  # fmt: skip
    kept_ordinary = [item for item in kept if any(item.node is a for a in ordinary)]
    if last is not None and id(last) in removed and kept_ordinary and not after_last:
        old_last = items.items[_position(items, last)]
        index = kept.index(kept_ordinary[-1])
        kept[index] = Item(kept[index].text, old_last.comma, kept[index].tail, kept[index].node)
    return ItemList(items.head, items.lead, kept, items.close)


def _position(items: ItemList, node) -> int:
    for position, item in enumerate(items.items):
        if item.node is node:
            return position
    return len(items.items)


def name_ids(node: ast.AST) -> set[int]:
    return {id(current) for current in ast.walk(node) if isinstance(current, ast.Name)}


def parents_of(tree: ast.AST) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


class NoImports:
    def qualify(self, node):
        return None
