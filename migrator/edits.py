"""Edits that rules ask for, as text edits over the source spans of `ast` nodes.

Rules never touch the text. They register, against nodes of the parsed module:
- replacements: `render(text, renderer) -> text` functions. `replace` covers the node with its
  own parentheses (the new code stands where the whole expression stood); `rewrite` covers the
  node without them (the parentheses stay around the new code). Renderers run bottom-up: the
  `text` a render function gets, and `renderer.text_of(child)`, already carry the edits of the
  nodes inside, so an outer rewrite keeps the inner ones;
- statement removals, and "clean-ups": simple statements dropped if, once the replacements are
  applied, they do nothing (`x = x`, `model`, `batch = {k: v for k, v in batch.items()}`);
- insertions of new statements before a statement index of a block (priority-ordered), written
  in the block's indentation and the file's newline.
Comments and blank lines above a removed statement stay above the next statement kept.
render.py applies them all in one pass.

    edits.replace(call.func, lambda text, r: "accelerator.print")       # `print(...)`
    edits.rewrite(call, lambda text, r: f"{text[:-1]}, flush=True)")     # keeps `(...)` around
    edits.remove(small_statement)
    edits.insert(block, 3, NewStatement("accelerator.wait_for_everyone()\\n"), priority=0)
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from migrator.analysis.syntax.index import Line

Render = Callable[[str, "object"], str]


@dataclass(frozen=True)
class NewStatement:
    """A statement to insert: `code` at indentation zero, "\\n"-terminated; its later lines
    are continuation lines, indented with the block."""

    code: str
    blank_line_before: bool = False


@dataclass(eq=False)
class ParamList:
    """The parameters of a `def`, as one editable node (ast has no position for them)."""

    function: ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class EditSet:
    replacements: dict[int, list[Render]] = field(default_factory=dict)  # with parentheses
    rewrites: dict[int, list[Render]] = field(default_factory=dict)  # inside them
    nodes: dict[int, object] = field(default_factory=dict)  # id -> the node edited
    removals: set[int] = field(default_factory=set)
    removed: dict[int, ast.AST] = field(default_factory=dict)
    cleanups: set[int] = field(default_factory=set)
    cleaned: dict[int, ast.AST] = field(default_factory=dict)
    drop_if_emptied: set[int] = field(default_factory=set)
    insertions: dict[tuple[int, int], list[tuple[int, NewStatement]]] = field(default_factory=dict)
    blocks: dict[int, object] = field(default_factory=dict)  # id -> Block with insertions
    dropped_names: set[int] = field(default_factory=set)  # ids of Name nodes that disappear
    _params: dict[int, ParamList] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.replacements or self.rewrites or self.removals or self.insertions)

    def replace(self, node, render: Render, drops=()) -> None:
        """Replace `node` and its own parentheses by `render(text, renderer)`."""
        self.nodes[id(node)] = node
        self.replacements.setdefault(id(node), []).append(render)
        for dropped in drops:
            self._drop(dropped)

    def rewrite(self, node, render: Render, drops=()) -> None:
        """Rewrite `node` inside its own parentheses (they stay); runs before `replace`s."""
        self.nodes[id(node)] = node
        self.rewrites.setdefault(id(node), []).append(render)
        for dropped in drops:
            self._drop(dropped)

    def replace_with(self, node, code: str) -> None:
        """Swap `node` for `code`; nothing of the old code survives."""
        self.replace(node, lambda _text, _renderer: code, drops=[node])

    def has_replacement(self, node) -> bool:
        return id(node) in self.replacements or id(node) in self.rewrites

    def cancel(self, node) -> None:
        """Forget the replacements of `node` (its dropped names stay dropped)."""
        self.replacements.pop(id(node), None)
        self.rewrites.pop(id(node), None)

    def remove(self, statement: ast.AST) -> None:
        self.removals.add(id(statement))
        self.removed[id(statement)] = statement
        self._drop(statement)

    def clean_up(self, small: ast.AST | None) -> None:
        if small is not None:
            self.cleanups.add(id(small))
            self.cleaned[id(small)] = small

    def insert(self, block, index: int, statement: NewStatement, priority: int) -> None:
        self.blocks[id(block)] = block
        self.insertions.setdefault((id(block), index), []).append((priority, statement))

    def withdraw(self, block, index: int, statement: NewStatement) -> None:
        """Take back an insertion (`statement`, the object given to `insert`)."""
        found = self.insertions.get((id(block), index), [])
        found[:] = [entry for entry in found if entry[1] is not statement]

    def params_of(self, function) -> ParamList:
        found = self._params.get(id(function))
        if found is None:
            found = self._params[id(function)] = ParamList(function)
        return found

    def _drop(self, node) -> None:
        if isinstance(node, ParamList):
            return
        if isinstance(node, Line):
            for small in node.body:
                self._drop(small)
            return
        for current in ast.walk(node):
            if isinstance(current, (ast.Name, ast.Attribute)):
                self.dropped_names.add(id(current))
