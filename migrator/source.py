"""The source text of one module and what `ast` positions mean in it.

`ast` gives lines (1-based) and UTF-8 byte columns; edits and findings work in characters.
`Source` converts one into the other (lines are split as Python's tokenizer splits them: on
\\r\\n, \\r and \\n only), and knows two things LibCST used to tell us for free:
- a node's *own* parentheses (`(a + b)` belongs to the BinOp; `f(x)`'s belong to the call),
  which `ast` leaves out of the node's span;
- the file's newline (its first line ending), which new code is written in.
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
import warnings
from functools import cached_property

_NEWLINE = re.compile(r"\r\n|\r|\n")
_KEYWORDS = frozenset(keyword.kwlist)  # `if (x)` groups; `print (x)` calls
_CALLABLE_END = frozenset(")]}\"'")


class Source:
    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0]
        for match in _NEWLINE.finditer(text):
            starts.append(match.end())
        self.line_starts = starts  # offset of each line's first character (1-based lines)
        self._ascii = text.isascii()

    # -- positions ---------------------------------------------------------------------------
    def offset(self, line: int, byte_column: int) -> int:
        """The character offset of an `ast` (line, UTF-8 column) position."""
        start = self.line_starts[line - 1]
        if self._ascii:
            return start + byte_column
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        segment = self.text[start:end]
        if segment.isascii():
            return start + byte_column
        return start + len(segment.encode("utf-8")[:byte_column].decode("utf-8", "replace"))

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def column(self, node: ast.AST) -> int:
        """The 0-based character column of a node's start."""
        return self.start(node) - self.line_starts[node.lineno - 1]

    def line_of(self, offset: int) -> int:
        """The 1-based line holding a character offset."""
        low, high = 0, len(self.line_starts) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.line_starts[middle] <= offset:
                low = middle
            else:
                high = middle - 1
        return low + 1

    def line_end(self, line: int) -> int:
        """The offset just after line `line`'s newline (or the end of the text)."""
        return self.line_starts[line] if line < len(self.line_starts) else len(self.text)

    def line_text(self, line: int) -> str:
        return self.text[self.line_starts[line - 1] : self.line_end(line)]

    @property
    def line_count(self) -> int:
        return len(self.line_starts) - (1 if self.line_starts[-1] == len(self.text) else 0)

    # -- spans -------------------------------------------------------------------------------
    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.start(node), self.end(node)

    def own_span(self, node: ast.AST) -> tuple[int, int]:
        """The node's span with the parentheses that belong to it (LibCST's lpar/rpar)."""
        start, end = self.span(node)
        text = self.text
        while True:
            before = _skip_space_back(text, start)
            if before <= 0 or text[before - 1] != "(":
                return start, end
            after = _skip_space(text, end)
            if after >= len(text) or text[after] != ")":
                return start, end
            if self._opens_call(before - 1):
                return start, end
            start, end = before - 1, after + 1

    def _opens_call(self, paren: int) -> bool:
        """Is the `(` at `paren` a call's (or a class's bases') rather than a grouping?"""
        text = self.text
        index = _skip_space_back(text, paren)
        if index <= 0:
            return False
        last = text[index - 1]
        if last in _CALLABLE_END:
            return True
        if not (last.isalnum() or last == "_"):
            return False
        word_start = index - 1
        while word_start > 0 and (text[word_start - 1].isalnum() or text[word_start - 1] == "_"):
            word_start -= 1
        return text[word_start:index] not in _KEYWORDS

    def text_of(self, node: ast.AST) -> str:
        """The node's original code, with its own parentheses (LibCST's `code_for_node`)."""
        start, end = self.own_span(node)
        return self.text[start:end]

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    # -- style -------------------------------------------------------------------------------
    @cached_property
    def newline(self) -> str:
        match = _NEWLINE.search(self.text)
        return match.group(0) if match else "\n"

    def indentation(self, line: int) -> str:
        text = self.line_text(line)
        return text[: len(text) - len(text.lstrip(" \t\f"))]


def quiet_parse(text: str, mode: str = "exec") -> ast.AST:
    """`ast.parse` without the warnings Python prints about the code (invalid escapes...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, mode=mode)


def continuation_lines(text: str) -> set[int]:
    """1-based lines of `text` that start inside a multi-line string token or continue a line
    ending in a backslash."""
    found: set[int] = set()
    ended: set[int] = set()  # lines that end with a NEWLINE / NL / comment token
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, _, (start_line, _), (end_line, _), _ = token
            if kind == tokenize.STRING and end_line > start_line:
                found.update(range(start_line + 1, end_line + 1))
            elif kind in (tokenize.NEWLINE, tokenize.NL):
                ended.add(start_line)
    except (tokenize.TokenError, SyntaxError):
        pass
    for number, line in enumerate(split_lines(text), start=1):
        stripped = line.rstrip("\r\n")
        if stripped.endswith("\\") and number not in ended and number + 1 not in found:
            found.add(number + 1)
    return found


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python's tokenizer splits them."""
    lines, start = [], 0
    for match in _NEWLINE.finditer(text):
        lines.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def _skip_space_back(text: str, index: int) -> int:
    """The index just after the last non-whitespace character before `index`."""
    while index > 0:
        char = text[index - 1]
        if char in " \t\f\r\n" or char == "\\" and index < len(text) and text[index] in "\r\n":
            index -= 1
        else:
            break
    return index


def _skip_space(text: str, index: int) -> int:
    """The index of the first non-whitespace character at or after `index` (backslash
    continuations are whitespace)."""
    length = len(text)
    while index < length:
        char = text[index]
        if char in " \t\f\r\n" or char == "\\" and index + 1 < length and text[index + 1] in "\r\n":
            index += 1
        else:
            break
    return index


def skip_space(text: str, index: int) -> int:
    return _skip_space(text, index)


def skip_space_and_comments(text: str, index: int) -> int:
    """Like skip_space, and past `# ...` comments too."""
    length = len(text)
    while True:
        index = _skip_space(text, index)
        if index < length and text[index] == "#":
            while index < length and text[index] not in "\r\n":
                index += 1
            continue
        return index
