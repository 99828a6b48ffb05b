"""Points in a block of statements: where imports and a docstring end (an Accelerator or a
prepare never goes above them), and whether every path through some statements binds a name."""

from __future__ import annotations

import ast

from migrator.analysis.syntax.index import Block, Line


def is_import(node: ast.AST) -> bool:
    return isinstance(node, Line) and all(
        isinstance(small, (ast.Import, ast.ImportFrom)) for small in node.body
    )


def is_docstring(node: ast.AST) -> bool:
    if not isinstance(node, Line) or len(node.body) != 1:
        return False
    small = node.body[0]
    return (
        isinstance(small, ast.Expr)
        and isinstance(small.value, ast.Constant)
        and isinstance(small.value.value, (str, bytes))
    )


def after_imports(block: Block, limit: int) -> int:
    """The index just after the last import (or docstring) before `limit`."""
    position = 0
    for i, node in enumerate(block.statements[:limit]):
        if is_import(node) or (i == 0 and is_docstring(node)):
            position = i + 1
    return position


def flat(statements: list) -> list[ast.stmt]:
    return [small for node in statements
            for small in (node.body if isinstance(node, Line) else [node])]  # fmt: skip


def binds_on_every_path(statements: list[ast.stmt], name: str) -> bool:
    """Does every path through `statements` bind `name` (`self.optimizer`), or raise?
    An `if`/`elif`/`else` chain counts when each branch does."""
    for node in statements:
        if isinstance(node, ast.Raise):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else [])  # fmt: skip
        for target in targets:
            parts = target.elts if isinstance(target, ast.Tuple) else [target]
            if any(ast.unparse(part) == name for part in parts):
                return True
        if isinstance(node, ast.If) and (
            binds_on_every_path(node.body, name) and binds_on_every_path(node.orelse, name)
        ):
            return True
        if isinstance(node, ast.With) and binds_on_every_path(node.body, name):
            return True
    return False


# A program of several files is joined into one module, each file ending with
# `__migrator_program_file__ = N` (migrator/program/unit.py's MARKER): what a rule writes in
# one file cannot read the names another file binds.
PROGRAM_FILE_MARKER = "__migrator_program_file__"


def file_part(tree: ast.Module, lineno: int) -> int:
    """Which file of a joined program the line is in (0 for the first; always 0 in a file
    migrated alone): the count of file markers before it."""
    return sum(
        1
        for node in tree.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == PROGRAM_FILE_MARKER
        and node.lineno < lineno
    )
