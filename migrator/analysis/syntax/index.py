"""One syntactic pass over a module: scopes, blocks, statements, bindings, name uses, calls, loops.

Built from CPython's `ast` in a single walk (no metadata providers): positions are statement
paths (block + index), scopes are tracked by hand, and "store vs load" is decided from the
syntactic slot a name sits in. A block's statements are *lines*: simple statements that share
a logical line (`a = 1; b = 2`) form one `Line`, as a reader sees them, and edits address them
that way. Role inference (roles.py) reads this index; nothing here knows about models or
optimizers.
"""

from __future__ import annotations

import ast

from migrator.analysis.syntax.imports import ImportTable, dotted_name
from migrator.analysis.syntax.indexer import Indexer
from migrator.analysis.syntax.nodes import (
    COMPOUND,
    Binding,
    Block,
    CallSite,
    Line,
    Loop,
    Scope,
    Statement,
    Use,
    param_names,
    target_names,
)
from migrator.analysis.syntax.views import call_args, name_of
from migrator.source import Source


class ModuleIndex:
    def __init__(self, tree: ast.Module, source: Source) -> None:
        self.tree = tree
        self.source = source
        self.imports = ImportTable()
        self.scopes: list[Scope] = []
        self.functions: dict[str, Scope] = {}  # module-level and nested functions by name
        self.statement_of: dict[int, Statement] = {}
        self.loop_of: dict[int, Loop] = {}
        self.scope_of_node: dict[int, Scope] = {}
        self.blocks: dict[tuple[int, str], Block] = {}  # (id(owner), field) -> block
        self.small_line: dict[int, Line] = {}  # id of a simple statement -> its Line
        self._calls: list[CallSite] | None = None
        self._calls_by_name: dict[str, list[CallSite]] | None = None
        Indexer(self).run()
        self.aliases: dict[str, str] = {}

    def add_aliases(self, aliases: dict[str, str]) -> None:
        """Other names a call may use for a function or class of this module: in a program
        joined into one module (`migrator/program.py`), `g` for `from engine import
        train_one_epoch as g` and `engine.train_one_epoch` for `import engine`."""
        self.aliases.update(aliases)
        for alias, name in aliases.items():
            if name in self.functions and alias not in self.functions:
                self.functions[alias] = self.functions[name]
        self._calls_by_name = None

    def statement_of_small(self, small: ast.stmt) -> Statement | None:
        """The Statement of the line that holds the simple statement `small`."""
        line = self.small_line.get(id(small))
        return self.statement_of.get(id(line)) if line is not None else None

    @property
    def module_scope(self) -> Scope:
        return self.scopes[0]

    def calls(self) -> list[CallSite]:
        if self._calls is None:
            self._calls = [call for scope in self.scopes for call in scope.calls]
        return self._calls

    def calls_named(self, name: str) -> list[CallSite]:
        """The calls of `name(...)` (or `self.name(...)` for "self.name"), in index order."""
        if self._calls_by_name is None:
            by_name: dict[str, list[CallSite]] = {}
            for site in self.calls():
                called = name_of(site.node.func)
                if called is not None:
                    by_name.setdefault(called, []).append(site)
                aliased = self.aliases.get(dotted_name(site.node.func) or "")
                if aliased is not None:
                    by_name.setdefault(aliased, []).append(site)
            self._calls_by_name = by_name
        return self._calls_by_name.get(name, [])

    def block(self, owner: ast.AST, field_name: str = "body") -> Block | None:
        return self.blocks.get((id(owner), field_name))


__all__ = [
    "COMPOUND", "Binding", "Block", "CallSite", "Line", "Loop", "ModuleIndex", "Scope",
    "Statement", "Use", "call_args", "param_names", "target_names",
]  # fmt: skip


def reaching_binding(bindings: list[Binding], at: Statement | None) -> Binding | None:
    """The binding of `at`'s block, before `at`, with no other binding between them: the one
    whose value `at` reads."""
    if at is None:
        return None
    block = at.block
    before = [(b.statement.ancestor_in(block), b) for b in bindings]
    before = [(s.index, b) for s, b in before if s is not None and s.index < at.index]
    if not before:
        return None
    index, binding = max(before, key=lambda pair: pair[0])
    direct = binding.statement.block is block
    alone = sum(1 for i, _ in before if i == index) == 1
    return binding if direct and alone else None
