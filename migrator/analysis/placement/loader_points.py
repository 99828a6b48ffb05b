"""Loaders prepared on their own, apart from the one prepare call of the owner (plan.py):
where a wrapper takes a loader before the model exists (`it = cycle(train_loader)`, a dict of
loaders), before a loop that makes a model per pass, and where an evaluation loader is made
after training."""

from __future__ import annotations

import ast

from migrator.analysis.placement.reading import training_statements
from migrator.analysis.placement.setup_uses import NEUTRAL_CALLEES, container_of
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import Block, Line, Statement


def _wrapper_use(use, owner) -> str | None:
    """The name `use` binds if its statement is `name = wrapper(loader, ...)` (one assignment
    in the owner's body, the loader its first argument) or puts the loader in a container
    (`loaders = {"train": loader_train, ...}`), else None."""
    line = use.statement.node
    held = container_of(use)
    if held is not None:
        return held
    if use.kind != "arg" or not isinstance(line, Line) or len(line.body) != 1:
        return None
    if use.callee == "len" or use.callee in NEUTRAL_CALLEES:
        return None  # `steps = len(loader)` holds no loader
    small = line.body[0]
    if not isinstance(small, ast.Assign) or len(small.targets) != 1:
        return None
    target = small.targets[0]
    call = small.value
    if not isinstance(target, ast.Name) or not isinstance(call, ast.Call) or not call.args:
        return None
    if call.args[0] is not use.node or use.call is not call:
        return None
    return target.id


def early_loaders(facts: TrainingFacts, owner, mandatory: list[str]) -> list:
    """Loaders bound into a wrapper or a container before the last model/optimizer
    definition, in the same block: (name, block, index) to prepare each on its own just
    before its wrapper."""
    every = facts.loaders
    loaders = [n for n in mandatory if n in every]
    others = [n for n in mandatory if n not in loaders]
    found = []
    for name in loaders:
        wraps = [u for u in owner.uses.get(name, []) if _wrapper_use(u, owner) is not None]
        if not wraps:
            continue
        first = min(wraps, key=lambda u: (u.statement.node.lineno, u.statement.node.col_offset))
        block = first.statement.block
        if block.scope is not owner:
            continue
        later = [b for n in others for b in owner.assigns(n)
                 if b.statement.ancestor_in(block) is not None
                 and b.statement.ancestor_in(block).index > first.statement.index]  # fmt: skip
        defs = [b.statement.ancestor_in(block) for b in owner.assigns(name)]
        if not later or any(d is None or d.index >= first.statement.index for d in defs):
            continue
        found.append((name, block, first.statement.index))
    return found


def loaders_before_a_loop(facts: TrainingFacts, owner, mandatory: list[str], early) -> list:
    """Loaders made before a loop of the owner's body that makes every model and optimizer
    (`for name in model_names: model = build(name); optimizer = ...; train(...)`, folds
    sharing one loader): (name, block, index) to prepare each loader once, before that loop;
    the models and optimizers are prepared in each pass, where they are made."""
    block = owner.body
    taken = {e[0] for e in early}
    every = facts.loaders
    loaders = [n for n in mandatory if n not in taken and n in every]
    others = [n for n in mandatory if n not in taken and n not in loaders]
    if not loaders or not others:
        return []
    holders = {
        id(s.node): s
        for n in others
        for b in owner.assigns(n)
        if (s := b.statement.ancestor_in(block)) is not None
    }
    if len(holders) != 1:
        return []
    loop = next(iter(holders.values()))
    if not isinstance(loop.node, (ast.For, ast.While)) or any(
        t.node is loop.node for t in facts.training_loops
    ):
        return []
    for name in loaders:
        defs = [b.statement.ancestor_in(block) for b in owner.assigns(name)]
        if not defs or any(d is None or d.index >= loop.index for d in defs):
            return []
    return [(name, block, loop.index) for name in loaders]


def within_loop(block: Block, index: int, statements: list[Statement]) -> list[Statement]:
    """The uses inside `block.statements[index]` (the loop making a model per pass), dropping
    those after it; uses before it stay, to be found too early."""
    found = []
    for statement in statements:
        ancestor = statement.ancestor_in(block)
        if ancestor is None or ancestor.index <= index:
            found.append(statement)
    return found


def late_loaders(facts: TrainingFacts, owner, mandatory: list[str]) -> list:
    """Evaluation loaders made once, in the owner, after its last training statement (a sample
    sentence run through the trained model, a test set under `if args.test:`): (name, block,
    index) to prepare each on its own right after it is made, in the block that makes it (in
    no loop: made once), as the others are prepared before training."""
    block = owner.body
    training = training_statements(facts, block)
    if not training:
        return []
    found = []
    for name in mandatory:
        if name in facts.train_loaders or name not in facts.eval_loaders:
            continue
        bindings = owner.assigns(name)
        made = bindings[0].statement if len(bindings) == 1 else None
        top = made.ancestor_in(block) if made is not None else None
        if top is None or top.index <= max(training) or made.block.kind == "suite":
            continue
        if any(isinstance(s.node, (ast.For, ast.AsyncFor, ast.While)) for s in made.chain()[:-1]):
            continue
        found.append((name, made.block, made.index + 1))
    return found
