"""Which lines belong to which statement: the layout that edits keep.

Comments and blank lines between statements belong to the statement below them (its *leading
lines*); those at the end of an indented block that are indented at least as deep as the block
belong to the block (its *footer*), the rest to whatever follows; the module's header (lines
before its first statement) and footer belong to the module. These are the ownership rules
LibCST used, and what a reader expects when a statement goes: its comment goes to the next
statement kept, a block's trailing comment stays in the block.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.syntax.nodes import COMPOUND, Block, Line
from migrator.source import Source


@dataclass(frozen=True)
class LeadingLine:
    text: str  # the whole line, newline included
    comment: bool


@dataclass
class StatementLayout:
    node: ast.AST
    first_line: int  # its first line (a decorator's, for decorated definitions)
    last_line: int  # its last line, nested blocks' footers included
    leading: list[LeadingLine] = field(default_factory=list)


@dataclass
class BlockLayout:
    indent: str
    statements: list[StatementLayout]
    footer: str  # the footer's text (indented blocks and the module)
    start: int  # offset where the block's text starts (its first leading line)
    end: int  # offset just after its footer


def is_code(text: str) -> bool:
    stripped = text.strip(" \t\f\r\n\v")
    return bool(stripped) and not stripped.startswith("#")


def is_suite(source: Source, first: ast.stmt) -> bool:
    """Does a block's first statement sit on its header's line (`if x: pass`)?"""
    line_start = source.line_starts[first.lineno - 1]
    # Byte column as characters: exact when what precedes is indentation (ASCII), and
    # anything else makes the prefix not blank either way.
    if source.text[line_start : line_start + first.col_offset].strip(" \t\f"):
        return True
    if first.lineno == 1:
        return False
    previous = source.line_text(first.lineno - 1).rstrip("\r\n")
    return previous.endswith("\\") and not previous.lstrip().startswith("#")


def blocks_in_order(node: ast.AST, is_elif) -> list[list[ast.stmt]]:
    """The statement lists of a compound statement, in source order (elif bodies included)."""
    if not isinstance(node, COMPOUND):
        return []
    if isinstance(node, ast.If):
        found = [node.body]
        if node.orelse:
            first = node.orelse[0]
            if len(node.orelse) == 1 and isinstance(first, ast.If) and is_elif(first):
                found += blocks_in_order(first, is_elif)
            else:
                found.append(node.orelse)
        return found
    if isinstance(node, ast.Match):
        return [case.body for case in node.cases]
    found = [node.body]
    found += [handler.body for handler in getattr(node, "handlers", [])]
    for name in ("orelse", "finalbody"):
        if getattr(node, name, None):
            found.append(getattr(node, name))
    return found


def first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        return decorators[0].lineno
    return node.lineno


def semicolon_end(source: Source, small: ast.stmt) -> int:
    """The offset after a simple statement and its trailing `;` (and the blanks after it)."""
    text = source.text
    end = index = source.end(small)
    while index < len(text) and text[index] in " \t\f":
        index += 1
    if index < len(text) and text[index] == ";":
        index += 1
        while index < len(text) and text[index] in " \t\f":
            index += 1
        return index
    return end


def first_offset(source: Source, node: ast.AST) -> int:
    """Where the statement's code starts (the `@` of its first decorator)."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        index = source.start(decorators[0])
        while index > 0 and source.text[index - 1] != "@":
            index -= 1
        return index - 1 if index > 0 else source.start(node)
    return source.start(node)


def last_blocks(node: ast.AST, is_elif) -> list[ast.stmt] | None:
    """The statement list that ends a compound statement."""
    if isinstance(node, ast.If):
        if node.orelse:
            if (
                len(node.orelse) == 1
                and isinstance(node.orelse[0], ast.If)
                and is_elif(node.orelse[0])
            ):
                return last_blocks(node.orelse[0], is_elif)
            return node.orelse
        return node.body
    if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
        return node.orelse or node.body
    if isinstance(node, ast.Match):
        return node.cases[-1].body
    if hasattr(node, "finalbody"):  # Try, TryStar
        return node.finalbody or node.orelse or node.handlers[-1].body if (
            node.finalbody or node.orelse or node.handlers
        ) else node.body  # fmt: skip
    return node.body


class Layout:
    """Layouts of the blocks edits touch, computed on demand from the source lines."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._last_line: dict[int, int] = {}

    def is_elif(self, node: ast.If) -> bool:
        return self.source.text.startswith("elif", self.source.start(node))

    # -- extents ---------------------------------------------------------------------------
    def last_line(self, node: ast.AST) -> int:
        """The last line of a statement, with the footers of its (last) nested blocks."""
        if isinstance(node, Line) or not isinstance(node, COMPOUND):
            return node.end_lineno
        cached = self._last_line.get(id(node))
        if cached is None:
            statements = last_blocks(node, self.is_elif)
            cached = self.last_line(statements[-1])
            if not is_suite(self.source, statements[0]):
                cached = self._footer_end(statements[0].lineno, cached)
            self._last_line[id(node)] = cached
        return cached

    def _footer_end(self, first_statement_line: int, end: int) -> int:
        """The last line of the footer of a block whose statements start on
        `first_statement_line` and end on `end`: the last line before the next code that is
        indented at least as deep as the block."""
        source = self.source
        indent = source.indentation(first_statement_line)
        line, found = end + 1, end
        while line <= source.line_count:
            text = source.line_text(line)
            if is_code(text):
                break
            if indent and text.startswith(indent):
                found = line
            line += 1
        return found

    # -- blocks ----------------------------------------------------------------------------
    def block(self, block: Block) -> BlockLayout:
        source = self.source
        statements = []
        previous_end: int | None = None
        for index, entry in enumerate(block.statements):
            first = first_line(entry)
            last = self.last_line(entry)
            leading: list[LeadingLine] = []
            if block.kind == "body" or (block.kind == "module" and index > 0):
                lowest = previous_end + 1 if previous_end is not None else 1
                line = first - 1
                while line >= lowest and not is_code(source.line_text(line)):
                    line -= 1
                leading = [_leading(source.line_text(n)) for n in range(line + 1, first)]
            statements.append(StatementLayout(entry, first, last, leading))
            previous_end = last
        if block.kind == "suite":
            return BlockLayout("", statements, "", 0, 0)
        first = statements[0]
        start = source.line_starts[first.first_line - len(first.leading) - 1]
        footer_start = source.line_end(statements[-1].last_line)
        if block.kind == "module":
            return BlockLayout("", statements, source.text[footer_start:], start, len(source.text))
        end = source.line_end(self._footer_end(first.first_line, statements[-1].last_line))
        indent = source.indentation(first.first_line)
        return BlockLayout(indent, statements, source.text[footer_start:end], start, end)


def _leading(text: str) -> LeadingLine:
    return LeadingLine(text, text.lstrip(" \t\f").startswith("#"))
