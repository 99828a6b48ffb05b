"""How a helper module's class reaches the accelerator: at construction (see
docs/programs.md). A loss scaler in `misc.py` whose `__call__` now runs
`accelerator.backward(...)` is built in `main()` as `ScalerWithGradNorm()` and called in
`engine.py` as `loss_scaler(loss, optimizer, ...)`: the instance is what travels, so the
instance carries the accelerator. The class gets `__init__(self, ..., *, accelerator)` storing
`self.accelerator = accelerator` (an `__init__` is added when it has none), its methods read
`self.accelerator`, and every construction of it in the program passes
`accelerator=accelerator` (as for a helper function, `program_reach.py`).

Refused (ProgramError, the program is left as it is) where that would not hold: a method
without `self` (a staticmethod or classmethod), the accelerator read in the class body
itself, a class that already has an `accelerator` attribute, a class with a base but no
`__init__` of its own (an added one would bypass the base's), or a class another class of the
program derives from.
"""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.engine import parse
from migrator.program.files import ProgramError
from migrator.program.text_edits import has_param, offset, parameter_insert, reads_free
from migrator.source import Source

ACCELERATOR = "accelerator"
ATTRIBUTE = f"self.{ACCELERATOR}"


def reach_in_classes(text: str, path: Path, bases: set[str]) -> tuple[str, set[str]]:
    """`text` with each class that reads the free name `accelerator` given it at
    construction, and the names of those classes (whose constructions must pass it).
    `bases`: the names every class of the program derives from."""

    tree = parse(text)
    inserts: list[tuple[int, int, str]] = []  # (start, end, new text): end > start replaces
    classes: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and reads_free(node, ACCELERATOR):
            inserts += _class_edits(text, node, path, bases)
            classes.add(node.name)
    for start, end, new in sorted(inserts, reverse=True):
        text = text[:start] + new + text[end:]
    return text, classes


def _class_edits(text: str, node: ast.ClassDef, path: Path, bases: set[str]) -> list:

    where = f"class `{node.name}` of {path.name} (line {node.lineno})"
    if node.name in bases:
        raise ProgramError(f"the accelerator is needed in {where}, which another class derives "
                           "from; pass it to the classes by hand")  # fmt: skip
    if any(isinstance(n, ast.Attribute) and n.attr == ACCELERATOR for n in ast.walk(node)):
        raise ProgramError(f"the accelerator is needed in {where}, which already has an "
                           "`accelerator` attribute; pass it to the class by hand")  # fmt: skip
    methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if any(reads_free(n, ACCELERATOR) for n in node.body if n not in methods):
        raise ProgramError(f"the accelerator is needed in the body of {where}; migrate this "
                           "program by hand")  # fmt: skip
    edits: list[tuple[int, int, str]] = []
    for method in methods:
        if reads_free(method, ACCELERATOR):
            edits += _read_through_self(text, method, where)
    init = next((m for m in methods if m.name == "__init__"), None)
    newline = Source(text).newline
    if init is None:
        if node.bases or node.keywords:
            raise ProgramError(f"the accelerator is needed in {where}, which has a base class "
                               "but no __init__ of its own; pass it to the class by hand")  # fmt: skip
        first = methods[0]
        line = (first.decorator_list[0] if first.decorator_list else first).lineno
        at = offset(text, line, 0)
        indent = text[at : at + len(text[at:]) - len(text[at:].lstrip(" \t"))]
        added = (f"{indent}def __init__(self, *, {ACCELERATOR}):{newline}{indent}    "
                 f"{ATTRIBUTE} = {ACCELERATOR}{newline}{newline}")  # fmt: skip
        return [*edits, (at, at, added)]
    if _self_name(init) != "self" or has_param(init, ACCELERATOR):
        raise ProgramError(f"the accelerator is needed in {where}, whose __init__ cannot take "
                           "it as a parameter; pass it to the class by hand")  # fmt: skip
    at, new = parameter_insert(text, init)
    edits.append((at, at, new))
    return [*edits, _store_in_init(text, init, newline)]


def _read_through_self(text: str, method, where: str) -> list[tuple[int, int, str]]:

    decorators = {getattr(d, "id", getattr(d, "attr", None)) for d in method.decorator_list}
    own = _self_name(method)
    if own is None or decorators & {"staticmethod", "classmethod"}:
        raise ProgramError(f"the accelerator is needed in `{method.name}` of {where}, which "
                           "has no `self`; pass it to the class by hand")  # fmt: skip
    edits = []
    for inner in ast.walk(method):
        if isinstance(inner, ast.Name) and inner.id == ACCELERATOR:
            at = offset(text, inner.lineno, inner.col_offset)
            edits.append((at, at, f"{own}."))
    return edits


def _store_in_init(text: str, init, newline: str) -> tuple[int, int, str]:
    """`self.accelerator = accelerator` as the first statement of `__init__` (after its
    docstring; in place of a lone `pass`)."""

    body = init.body
    store = f"{ATTRIBUTE} = {ACCELERATOR}"
    first = body[0]
    start = offset(text, first.lineno, first.col_offset)
    indent = _indent(text, start)
    if isinstance(first, ast.Pass) and len(body) == 1:
        return start, offset(text, first.end_lineno, first.end_col_offset), store
    if _is_docstring(first):
        end = offset(text, first.end_lineno, first.end_col_offset)
        return end, end, f"{newline}{indent}{store}"
    return start, start, f"{store}{newline}{indent}"


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and (isinstance(statement.value.value, str))
    )


def _self_name(method) -> str | None:
    positional = [*method.args.posonlyargs, *method.args.args]
    return positional[0].arg if positional else None


def _indent(text: str, at: int) -> str:
    line_start = text.rfind("\n", 0, at) + 1
    prefix = text[line_start:at]
    return prefix if not prefix.strip() else " " * len(prefix)


def base_names(trees: list[ast.Module]) -> set[str]:
    """The names the program's classes derive from (`class A(Base)`, `class A(misc.Base)`)."""
    found: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if isinstance(base, ast.Name):
                        found.add(base.id)
                    elif isinstance(base, ast.Attribute):
                        found.add(base.attr)
    return found
