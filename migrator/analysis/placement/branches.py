"""Prepare inside the branches of an `if` where the training objects first meet.

Train/test scripts make and use their objects under a mode switch: `if train:` makes the
loader and runs the training loop, `else:` makes a test loader and evaluates; a resume
(`if resume: net, optim, epoch = load(net=net, optim=optim)`) re-binds the objects just
before the loop. When the statement of the owner's block that holds the last definition of
the objects also holds their first use, and it is an `if` (an `elif` chain included), each
branch prepares the objects it uses, after their last definition in it and before their first
use in it, by the same rules as the block itself (placement.py), down through nested `if`s.
A branch that uses none prepares nothing. Any use after the `if` would see objects prepared
on some paths only: no point then (placement.py says which lines).
"""

from __future__ import annotations

import ast

from migrator.analysis.placement.reading import training_statements
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import Block, Statement


def branch_points(
    facts: TrainingFacts,
    block: Block,
    position: int,
    names: list[str],
    defs: dict[str, list[Statement]],
    hard: dict[str, list[Statement]],
    runs: set[int],
) -> list[tuple[list[str], Block, int]] | None:
    """(objects, branch block, index) of one prepare per branch of the `if` at
    `block.statements[position]` that uses some of `names`; None when a branch has no point
    after its definitions and before its uses, or the objects are used after the `if`."""
    statement = block.statements[position]
    if not isinstance(statement, ast.If):
        return None
    branches = _branches(facts, statement)
    for uses in hard.values():
        for use in uses:
            found = use.ancestor_in(block)
            if found is not None and found.index > position:
                return None  # after the `if`: prepared on some paths only
            if (
                found is not None
                and found.index == position
                and not any(b is not None and use.ancestor_in(b) is not None for b in branches)
            ):
                return None  # in a test (`if model(x).sum() > 0:`): before any prepare
    points: list[tuple[list[str], Block, int]] = []
    for branch in branches:
        found = _point(facts, branch, names, defs, hard, runs)
        if found is None:
            return None
        points.extend(found)
    return points or None


def _branches(facts: TrainingFacts, node: ast.If) -> list[Block]:
    """The blocks of an `if`, its `elif`s and its `else`, in order."""
    index = facts.index
    found = [index.block(node, "body")]
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) and (
        index.block(node.orelse[0], "body") is not None and index.block(node, "orelse") is None
    ):  # fmt: skip
        node = node.orelse[0]
        found.append(index.block(node, "body"))
    if node.orelse:
        found.append(index.block(node, "orelse"))
    return found


def _point(facts, branch: Block | None, names, defs, hard, runs) -> list | None:

    if branch is None or branch.kind != "body":
        return None  # `if train: loop()` on one line: nowhere to insert

    def position(statement: Statement) -> int:
        found = statement.ancestor_in(branch)
        return found.index if found is not None else -1

    used = [n for n in names if any(position(s) >= 0 for s in hard.get(n, []))]
    if not used:
        return []
    # A branch using the objects also needs those no branch names, which only the functions
    # it calls read (`optimizer`, a module global the `train_step(model, loader)` steps).
    used = [n for n in names if n in used or not _in_branches(hard.get(n, []), branch)]
    last = max((position(s) for n in used for s in defs.get(n, [])), default=-1)
    training = training_statements(facts, branch)
    # as in the owner's block: set-up uses before the last definition keep the plain objects
    uses = [s for n in used for s in hard.get(n, []) if position(s) >= 0]
    uses = [s for s in uses
            if position(s) >= last or position(s) in training or id(s) in runs]  # fmt: skip
    first = min((position(s) for s in uses), default=len(branch.statements))
    if last < first:
        return [(used, branch, last + 1)]
    if last == first:  # met again in one statement: a nested `if`
        inner = {n: [s for s in hard.get(n, []) if position(s) >= 0] for n in used}
        return branch_points(facts, branch, last, used, defs, inner, runs)
    return None


def _in_branches(uses: list[Statement], branch: Block) -> bool:
    """Is one of `uses` inside the `if` statement (its `elif`s and `else` included) that
    `branch` belongs to?"""
    statement = branch.parent
    return statement is not None and any(use.ancestor_in(statement.block) is statement
                                         for use in uses)  # fmt: skip


def order_words(name: str, line: int, how: str, late: str, made: int, shared) -> str:
    """What MIG900 found: `name` used at `line` before `late` is made at `made`, or, with
    `shared` (the statement of the block holding both), the two inside that statement."""
    if shared is None:
        return f"found `{name}` used at line {line}{how} before `{late}` defined at line {made}"
    used = f"used at line {line}{how}" if name == late else f"`{name}` used at line {line}{how}"
    kind = {"If": "if", "For": "for", "While": "while", "With": "with", "Try": "try"}.get(
        type(shared).__name__, "statement"
    )
    why = {
        "if": ", and no branch of it has a point after the one and before the other",
        "for": ": made and used in one loop",
        "while": ": made and used in one loop",
    }.get(kind, "")
    return (
        f"found `{late}` defined at line {made} and {used}, both inside the `{kind}` at line "
        f"{shared.lineno}{why}"
    )
