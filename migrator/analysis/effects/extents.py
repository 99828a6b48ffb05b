"""The extents of per-process values (values.py): what a value counts on one process of a
migrated program — `LOCAL` (its share of the data), `GLOBAL` (the whole data's), `CONST` (the
same everywhere) or `MIXED` (a share mixed with a whole: nobody's number) — and how arithmetic,
joins and collections combine them."""

from __future__ import annotations

import ast
from dataclasses import dataclass

CONST, GLOBAL, LOCAL, MIXED = "the same on every process", "global", "this process's", "mixed"
ORDER = {CONST: 0, GLOBAL: 1, LOCAL: 2, MIXED: 3}


@dataclass(frozen=True)
class Value:
    extent: str = CONST
    # loader / model (prepared), plainloader, dataset, iterator, optimizer, scheduler,
    # accelerator, world (the number of processes), iterations (a count of loop passes),
    # LOCAL_ITEMS (an iterator whose items are this process's: `tqdm(loader)`)
    roles: frozenset = frozenset()


NOTHING = Value()
LOCAL_ITEMS = "local items"


def local_items(value: Value) -> bool:
    """Does iterating `value` yield this process's share of the data (a prepared loader, a
    wrapper around one, a generator of this process's values)?"""
    return bool(value.roles & {"loader", LOCAL_ITEMS}) or (
        "iterator" in value.roles and value.extent == LOCAL
    )


def combine(*values: Value) -> Value:
    """Arithmetic over `values`: a `LOCAL` with a `GLOBAL` is `MIXED`. A count of this
    process's loop passes stays one through arithmetic with constants (`3 * len(loader)`): it
    is the same on every process (the prepared loader evens out the batches)."""
    extents = {v.extent for v in values}
    if MIXED in extents or {LOCAL, GLOBAL} <= extents:
        return Value(MIXED)
    extent = max(extents, key=ORDER.get, default=CONST)
    return Value(extent, _same_everywhere(values))


def join(*values: Value) -> Value:
    """One of `values` (a name bound to each, a tuple of them): the least global."""
    extent = max((v.extent for v in values), key=ORDER.get, default=CONST)
    roles = frozenset().union(*(v.roles for v in values))
    return Value(extent, roles)


def _gathered(*values: Value) -> Value:
    """A tuple or an f-string of `values`: one of them (a count of passes, if all are)."""
    return Value(join(*values).extent, _same_everywhere(values))


def _same_everywhere(values) -> frozenset:
    """The roles of a `LOCAL` result that every process holds alike: a count of this
    process's passes (`iterations`) stays one when every local part is one; a batch size
    read from this process's batch (`batchsize`: the prepared loader gives every process
    batches of one size) when every local part is one of the two."""
    local = [v for v in values if v.extent == LOCAL]
    if not local:
        return frozenset()
    if all("iterations" in v.roles for v in local):
        return frozenset({"iterations"})
    if all(v.roles & {"iterations", "batchsize"} for v in local):
        return frozenset({"batchsize"})
    return frozenset()


def arithmetic(op: ast.operator, left: Value, right: Value) -> Value:
    """`left <op> right`: a count of this process's loop passes times the number of processes
    counts every process's; a sum of gathered per-pass values over this process's pass count
    is their mean; other arithmetic combines."""
    roles = left.roles | right.roles
    counted = {left.extent, right.extent} == {LOCAL, CONST}
    if isinstance(op, ast.Mult) and counted and "world" in roles:
        return Value(GLOBAL)
    if isinstance(op, ast.Div) and "iterations" in right.roles and right.extent == LOCAL:
        return Value(left.extent)
    return combine(left, right)
