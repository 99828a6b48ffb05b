"""How placement reads a block: the statements that define a training object, the uses that need
the prepared one (hard) or may see the plain one, the statements that train, and the deepest
block holding a set of statements. Shared by the owner's plan (plan.py), the other scopes that
make objects (homes.py) and the branches of an `if` (branches.py)."""

from __future__ import annotations

import ast
import re

from migrator.analysis.placement.setup_uses import (
    NEUTRAL_ATTRIBUTES,
    NEUTRAL_CALLEES,
    aliased_by_mode_switch,
)
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import Block, Line, Statement
from migrator.findings import Finding


def definitions(facts: TrainingFacts, scope, name: str) -> list[Statement]:
    found = [b.statement for n in facts.distributed.names_for(scope, name)
             for b in scope.assigns(n)]  # fmt: skip
    found += [b.statement for n in holders(name) for b in scope.assigns(n)]
    return found + [b.statement for b in facts.chain_bindings(scope, name)]


def holders(name: str) -> list[str]:
    """`self.cfg` for `self.cfg.optimiser`: an object held on another object (an attribute
    chain, facts.chain_origin) exists once its holder is bound."""
    cuts = [m.start() for m in re.finditer(r"[.\[]", name)]
    first = 1 if name.startswith("self.") else 0
    return [name[:cut] for cut in cuts[first:]]


def training_statements(facts: TrainingFacts, block: Block) -> set[int]:
    """Indexes of `block`'s statements that hold a training loop or call the function that
    does (by name: `train(...)`, `self.fit(...)`)."""
    found: set[int] = set()
    for loop in facts.training_loops:
        statement = loop.statement.ancestor_in(block)
        if statement is not None:
            found.add(statement.index)
    names = training_functions(facts)
    for index, node in enumerate(block.statements):
        if index not in found and calls_any(node, names):
            found.add(index)
    return found


def training_functions(facts: TrainingFacts) -> set[str]:
    """The names of the functions holding a training loop (`train`, `fit`)."""
    return {loop.scope.name for loop in facts.training_loops if loop.scope.kind == "function"}


def calls_any(node: ast.AST, names: set[str]) -> bool:
    """`node` calls one of `names`, by name (`train(...)`, `self.fit()`)."""
    if not names:
        return False
    parts = node.body if isinstance(node, Line) else [node]
    for inner in (n for part in parts for n in ast.walk(part)):
        func = inner.func if isinstance(inner, ast.Call) else None
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called is not None and called in names:
            return True
    return False


def use_kind(use, name: str, def_nodes: set[int], facts: TrainingFacts) -> str | None:
    if id(use.statement.node) in def_nodes and use.kind != "iter":
        return None  # `optimizer = AdamW(model.parameters())`, `model = model.to(device)`
    line = use.statement.node
    if isinstance(line, Line) and len(line.body) == 1 and facts.distributed.plain_alias(
        use.statement.block.scope, line.body[0]
    ):  # fmt: skip
        return None  # `model_without_ddp = model`: the plain model, on purpose
    if use.kind == "attr":
        if aliased_by_mode_switch(use):
            return "hard"  # `model = self.model.train()`: a second name for the plain object
        return None if use.attr in NEUTRAL_ATTRIBUTES else "hard"
    if use.kind == "arg":
        if use.callee == "len" and name in facts.loaders:
            return "soft"
        if use.callee in NEUTRAL_CALLEES:
            return None
        return "hard"
    return "hard"


def common_block(events: list[Statement], body: Block) -> Block | None:
    """The deepest block that holds every event (in possibly different statements)."""
    if not events:
        return body
    chains = [event.chain() for event in events]
    depth = 0
    while all(len(chain) > depth + 1 for chain in chains) and all(
        chain[depth] is chains[0][depth] for chain in chains
    ):
        depth += 1
    blocks = {id(chain[depth].block) for chain in chains}
    if len(blocks) != 1:
        return None
    return chains[0][depth].block


def line_of(statement: Statement) -> int:
    return statement.node.lineno


def conflict_finding(facts: TrainingFacts, why: str) -> Finding:
    return Finding(
        code="MIG900",
        message=f"cannot place accelerator.prepare(...): {why}; migrate by hand",
        node=facts.training_loops[0].node if facts.training_loops else None,
    )
