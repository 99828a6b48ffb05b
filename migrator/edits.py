"""Edits that rules ask for, and the one transformer that applies them all in a single pass.

Rules never mutate the tree. They register, against nodes of the *original* tree:
- replacements: functions `updated_node -> new_node`, composed bottom-up so a rewrite of an
  outer expression keeps the rewrites of its children (the TorchFix pitfall);
- statement removals, and "clean-ups": small statements dropped if, after the replacements,
  they do nothing (`x = x`, `model`, `batch = {k: v for k, v in batch.items()}`);
- insertions of new statements before a statement index of a block (priority-ordered).
Comments and blank lines above a removed statement move to the next statement kept.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst

Rewriter = Callable[[cst.CSTNode], cst.CSTNode]
EMPTY_LINE = cst.EmptyLine(indent=False)
CODEGEN = cst.Module(body=[])  # renders a node's code on its own


@dataclass
class EditSet:
    replacements: dict[int, list[Rewriter]] = field(default_factory=dict)
    removals: set[int] = field(default_factory=set)
    cleanups: set[int] = field(default_factory=set)
    drop_if_emptied: set[int] = field(default_factory=set)
    insertions: dict[tuple[int, int], list[tuple[int, cst.BaseStatement]]] = field(
        default_factory=dict
    )
    dropped_names: set[int] = field(default_factory=set)  # ids of Name nodes that disappear

    @property
    def empty(self) -> bool:
        return not (self.replacements or self.removals or self.insertions)

    def replace(self, node: cst.CSTNode, rewriter: Rewriter, drops=()) -> None:
        self.replacements.setdefault(id(node), []).append(rewriter)
        for dropped in drops:
            self._drop(dropped)

    def replace_with(self, node: cst.CSTNode, new_node: cst.CSTNode) -> None:
        """Swap `node` for `new_node`; nothing of the old subtree survives."""
        self.replace(node, lambda _updated: new_node, drops=[node])

    def has_replacement(self, node: cst.CSTNode) -> bool:
        return id(node) in self.replacements

    def remove(self, statement: cst.CSTNode) -> None:
        self.removals.add(id(statement))
        self._drop(statement)

    def clean_up(self, small_statement: cst.CSTNode | None) -> None:
        if small_statement is not None:
            self.cleanups.add(id(small_statement))

    def insert(self, holder: cst.CSTNode, index: int, statement, priority: int) -> None:
        self.insertions.setdefault((id(holder), index), []).append((priority, statement))

    def _drop(self, node: cst.CSTNode) -> None:
        collector = _NameCollector()
        node.visit(collector)
        self.dropped_names.update(collector.ids)


class _NameCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[int] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.ids.add(id(node))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.ids.add(id(node))  # `self.device` uses are Attribute nodes


def apply_edits(module: cst.Module, edits: EditSet) -> cst.Module:
    return module.visit(_Applier(edits))


class _Applier(cst.CSTTransformer):
    def __init__(self, edits: EditSet) -> None:
        super().__init__()
        self.edits = edits
        self.emptied: set[int] = set()

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        for rewriter in self.edits.replacements.get(id(original_node), ()):
            updated = rewriter(updated)
        return updated

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body, footer = self._rebuild(original_node, original_node.body, updated_node.body)
        return updated_node.with_changes(body=body, footer=[*footer, *updated_node.footer])

    def leave_IndentedBlock(self, original_node, updated_node):
        body, footer = self._rebuild(original_node, original_node.body, updated_node.body)
        if not body:
            self.emptied.add(id(original_node))
            body = [cst.SimpleStatementLine(body=[cst.Pass()])]
        return updated_node.with_changes(body=body, footer=[*footer, *updated_node.footer])

    def leave_SimpleStatementSuite(self, original_node, updated_node):
        kept = self._kept_smalls(original_node.body, updated_node.body)
        if not kept:
            self.emptied.add(id(original_node))
            kept = [cst.Pass()]
        return updated_node.with_changes(body=_fix_semicolons(kept))

    # -- blocks ------------------------------------------------------------------------------
    def _rebuild(self, holder, originals: Sequence, updates: Sequence):
        result: list = []
        carried: list[cst.EmptyLine] = []

        def emit(statement):
            nonlocal carried
            if carried:
                statement = statement.with_changes(
                    leading_lines=merge_leading(carried, list(statement.leading_lines))
                )
                carried = []
            result.append(statement)

        for index, (original, updated) in enumerate(zip(originals, updates)):
            for statement in self._inserted(holder, index):
                emit(statement)
            kept = self._kept_statement(original, updated)
            if kept is None:
                carried = merge_leading(carried, list(getattr(original, "leading_lines", ())))
            else:
                emit(kept)
        for statement in self._inserted(holder, len(originals)):
            emit(statement)
        footer = [line for line in carried if line.comment is not None]
        return result, footer

    def _inserted(self, holder, index: int) -> list:
        entries = self.edits.insertions.get((id(holder), index), [])
        return [statement for _, statement in sorted(entries, key=lambda entry: entry[0])]

    def _kept_statement(self, original, updated):
        if id(original) in self.edits.removals:
            return None
        if isinstance(original, cst.SimpleStatementLine):
            kept = self._kept_smalls(original.body, updated.body)
            if not kept:
                return None
            if len(kept) != len(updated.body):
                return updated.with_changes(body=_fix_semicolons(kept))
            return updated
        if id(original) in self.edits.drop_if_emptied:
            body = getattr(original, "body", None)
            orelse = getattr(original, "orelse", None)
            if (
                body is not None
                and id(body) in self.emptied
                and (orelse is None or id(getattr(orelse, "body", None)) in self.emptied)
            ):
                return None
        return updated

    def _kept_smalls(self, originals, updates) -> list:
        kept = []
        for original, updated in zip(originals, updates):
            if id(original) in self.edits.removals:
                continue
            if id(original) in self.edits.cleanups and does_nothing(updated):
                continue
            kept.append(updated)
        return kept


def _fix_semicolons(smalls: list) -> list:
    if not smalls:
        return smalls
    last = smalls[-1]
    if hasattr(last, "semicolon") and not isinstance(last.semicolon, cst.MaybeSentinel):
        smalls = [*smalls[:-1], last.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]
    return smalls


def merge_leading(first: list, second: list) -> list:
    """Concatenate leading lines, keeping one run of blank lines where the two meet."""
    if not first:
        return second
    if not second:
        return first
    tail = 0
    while tail < len(first) and first[len(first) - 1 - tail].comment is None:
        tail += 1
    head = 0
    while head < len(second) and second[head].comment is None:
        head += 1
    blanks = max(tail, head)
    return [*first[: len(first) - tail], *([EMPTY_LINE] * blanks), *second[head:]]


def _expression(node: cst.CSTNode) -> ast.expr | None:
    try:
        return ast.parse(CODEGEN.code_for_node(node).strip(), mode="eval").body
    except SyntaxError:
        return None


def _same(a: ast.expr | None, b: ast.expr | None) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, (ast.Tuple, ast.List)) and isinstance(b, (ast.Tuple, ast.List)):
        return len(a.elts) == len(b.elts) and all(_same(x, y) for x, y in zip(a.elts, b.elts))
    return ast.unparse(a) == ast.unparse(b)  # ignores Load/Store context and formatting


def _identity_comprehension(target: ast.expr, value: ast.expr) -> bool:
    """`{k: v for k, v in t.items()}`, `[x for x in t]`, `tuple(x for x in t)`, ... == t."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and (
            value.func.id in ("tuple", "list", "dict")
            and len(value.args) == 1
            and not value.keywords
        )
    ):
        value = value.args[0]
        if not isinstance(value, (ast.GeneratorExp, ast.ListComp, ast.DictComp)):
            return _same(target, value)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)) and len(value.generators) == 1:
        generator = value.generators[0]
        return (
            not generator.ifs
            and not generator.is_async
            and _same(value.elt, generator.target)
            and _same(target, generator.iter)
        )
    if isinstance(value, ast.DictComp) and len(value.generators) == 1:
        generator = value.generators[0]
        iterable = generator.iter
        if (
            generator.ifs
            or not isinstance(iterable, ast.Call)
            or not isinstance(iterable.func, ast.Attribute)
            or iterable.func.attr != "items"
            or iterable.args
        ):
            return False
        pair = generator.target
        return (
            isinstance(pair, ast.Tuple)
            and len(pair.elts) == 2
            and _same(value.key, pair.elts[0])
            and _same(value.value, pair.elts[1])
            and _same(target, iterable.func.value)
        )
    return False


def does_nothing(small: cst.CSTNode) -> bool:
    """A small statement with no effect left after placement calls were stripped."""
    if isinstance(small, cst.Expr):
        return isinstance(small.value, (cst.Name, cst.Attribute))
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = _expression(small.targets[0].target)
        value = _expression(small.value)
        return _same(target, value) or (
            target is not None and value is not None and _identity_comprehension(target, value)
        )
    return False
