"""The plan of `accelerator.prepare(...)` calls placement.py makes: what each call prepares
and before which statement it goes (the owner's call, loaders prepared early on their own,
the calls in other scopes that make objects: homes), and the questions rules ask of it."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.syntax.index import Block, Statement
from migrator.findings import Finding


@dataclass
class PreparePlan:
    objects: list[str] = field(default_factory=list)
    block: Block | None = None
    index: int = 0  # insert before block.statements[index]
    notes: list[Finding] = field(default_factory=list)
    conflict: Finding | None = None
    # loaders prepared on their own, before `block.statements[index]` (a wrapper binds them)
    early: list[tuple[str, Block, int]] = field(default_factory=list)
    # objects re-created after training (a model reloaded for inference): from
    # `block.statements[index]` on, the name holds a plain object again (MIG003 keeps its
    # `.to(device)`)
    reloaded: list[tuple[str, Block, int]] = field(default_factory=list)
    # objects made in another scope than the owner's (a class's other method: homes.py; module
    # level or a module-level function: function_homes.py): (names, block, index), one
    # `names = accelerator.prepare(names)` each
    homes: list[tuple[list[str], Block, int]] = field(default_factory=list)
    # before `block.statements[index]`, every process waits: module code re-creates a model
    # a function trained and the main process saved (function_homes.py)
    waits: list[tuple[Block, int]] = field(default_factory=list)
    # objects first met in an `if`: a prepare per branch using them (branch_placement.py);
    # `block.statements[index]` is then that `if`
    branches: list[tuple[list[str], Block, int]] = field(default_factory=list)

    def reloaded_at(self, name: str, statement: Statement) -> bool:
        """Does `name` at `statement` hold an object re-created after training?"""
        for reloaded, block, index in self.reloaded:
            found = statement.ancestor_in(block) if reloaded == name else None
            if found is not None and found.index >= index:
                return True
        return False

    def before_prepare(self, statement: Statement, name: str | None = None) -> bool:
        """Does `statement` run before the prepare call, and only then (in its block, before
        it, and that block in no loop): a model there is still the plain one. With `name`,
        before the call that prepares it: the owner's, or the one in the scope that makes
        it (`plan.homes`: a method of its class, module level or a function)."""
        homes = [(b, i) for names, b, i in self.homes if name in names and b.scope is
                 statement.block.scope]  # fmt: skip
        branched = [n for names, _block, _index in self.branches for n in names]
        if branched and (name is None or name in branched):
            # in a branch: before its prepare, or `name` not prepared there
            for names, block, index in self.branches:
                if statement.ancestor_in(block) is not None:
                    return (name is not None and name not in names) or _before(
                        statement, block, index
                    )
            return _before(statement, self.block, self.index)  # before the `if`
        own = bool(self.objects) and (name is None or name in self.objects)
        return any(_before(statement, b, i) for b, i in homes) or (
            own and _before(statement, self.block, self.index)
        )

    def prepares(self, name: str) -> bool:
        return (
            name in self.objects
            or any(early[0] == name for early in self.early)
            or any(name in names for names, _block, _index in [*self.homes, *self.branches])
        )


def _before(statement: Statement, block: Block | None, index: int) -> bool:
    found = statement.ancestor_in(block) if block is not None else None
    if found is None or found.index >= index:
        return False
    parent = block.parent
    while parent is not None:
        if isinstance(parent.node, (ast.For, ast.AsyncFor, ast.While)):
            return False
        parent = parent.block.parent
    return True
