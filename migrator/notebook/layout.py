"""A notebook's JSON text, changed only where a code cell's `source` changed.

Rewriting means splicing: the text of each changed cell's `source` value is replaced by the new
value, written the way that value was written (a list of lines or one string; the list's own
indentation; non-ASCII as is or `\\uXXXX`, as the file does), and every other byte of the
file is kept: indentation, key order, nbformat, metadata, markdown and raw cells, outputs,
execution counts, a trailing newline or its absence, a BOM.
"""

from __future__ import annotations

import codecs
import json
import re

_SPACE = re.compile(r"[ \t\n\r]*")
_ESCAPED_NON_ASCII = re.compile(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])[0-9a-fA-F]{2}")
_DECODER = json.JSONDecoder()


class LayoutError(ValueError):
    pass


def decode(data: bytes) -> tuple[str, bool]:
    """(the JSON text, whether the file starts with a UTF-8 BOM)."""
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        return data[len(codecs.BOM_UTF8) if bom else 0 :].decode("utf-8"), bom
    except UnicodeDecodeError as error:
        raise LayoutError(f"not UTF-8 ({error})") from None


def encode(text: str, bom: bool) -> bytes:
    return (codecs.BOM_UTF8 if bom else b"") + text.encode("utf-8")


def source_spans(text: str) -> dict[int, tuple[int, int]]:
    """{cell index: (start, end)} of each cell's `source` value in the text."""
    spans: dict[int, tuple[int, int]] = {}

    def member(key: str, start: int) -> int:
        return _cells(text, start, spans) if key == "cells" else _skip(text, start)

    _object(text, _space(text, 0), member)
    return spans


def render_source(value: str | list[str], text: str, span: tuple[int, int], ascii_only: bool):
    """`value` as JSON text in the style of the value it replaces (`text[span]`)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=ascii_only)
    items = [json.dumps(line, ensure_ascii=ascii_only) for line in value]
    if not items:
        return "[]"
    opening, separator, closing = _list_style(text, span)
    return "[" + opening + ("," + separator).join(items) + closing + "]"


def splice(text: str, replacements: dict[tuple[int, int], str]) -> str:
    """`text` with each (start, end) span replaced; spans do not overlap."""
    pieces = []
    position = 0
    for (start, end), new in sorted(replacements.items()):
        pieces += [text[position:start], new]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def writes_ascii_only(text: str) -> bool:
    """Does this file escape non-ASCII characters (`ensure_ascii`)? Jupyter does not."""
    return text.isascii() and _ESCAPED_NON_ASCII.search(text) is not None


def _object(text: str, position: int, member) -> int:
    """The end of the object starting at `position`; `member(key, value start)` returns the
    end of each value."""
    position = _space(text, _expect(text, position, "{"))
    if text.startswith("}", position):
        return position + 1
    while True:
        try:
            key, position = json.decoder.scanstring(text, _expect(text, position, '"'))
        except json.JSONDecodeError as error:
            raise LayoutError(str(error)) from None
        position = _space(text, _expect(text, _space(text, position), ":"))
        position = _space(text, member(key, position))
        if text.startswith("}", position):
            return position + 1
        position = _space(text, _expect(text, position, ","))


def _cells(text: str, position: int, spans: dict[int, tuple[int, int]]) -> int:
    position = _space(text, _expect(text, position, "["))
    index = 0
    while not text.startswith("]", position):
        if index:
            position = _space(text, _expect(text, position, ","))

        def member(key: str, start: int, index: int = index) -> int:
            end = _skip(text, start)
            if key == "source":
                spans[index] = (start, end)
            return end

        if text.startswith("{", position):
            position = _space(text, _object(text, position, member))
        else:
            position = _space(text, _skip(text, position))
        index += 1
    return position + 1


def _space(text: str, position: int) -> int:
    return _SPACE.match(text, position).end()


def _expect(text: str, position: int, token: str) -> int:
    if not text.startswith(token, position):
        raise LayoutError(f"expected {token!r} at offset {position}")
    return position + len(token)


def _skip(text: str, position: int) -> int:
    try:
        return _DECODER.raw_decode(text, position)[1]
    except json.JSONDecodeError as error:
        raise LayoutError(str(error)) from None


def _list_style(text: str, span: tuple[int, int]) -> tuple[str, str, str]:
    """The whitespace after `[`, after each `,` and before `]` of the list at `span`; for an
    empty list, what the file's indentation gives (one unit deeper than the key's line)."""
    start, end = span
    position = _space(text, start + 1)
    opening = text[start + 1 : position]
    if position >= end - 1:  # an empty list: no items to learn from
        if "\n" not in text:
            return "", " ", ""
        line_start = text.rfind("\n", 0, start) + 1
        line = text[line_start:start]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        unit = _indent_unit(text)
        return "\n" + indent + unit, "\n" + indent + unit, "\n" + indent
    separator = None
    while True:
        position = _skip(text, position)
        after = _space(text, position)
        if text.startswith("]", after):
            closing = text[position:after]
            break
        comma_end = _space(text, after + 1)
        if separator is None:
            separator = text[after + 1 : comma_end]
        position = comma_end
    return opening, opening if separator is None else separator, closing


def _indent_unit(text: str) -> str:
    """The indentation of the top-level keys (Jupyter: one space)."""
    match = re.match(r"\s*\{\r?\n([ \t]*)", text)
    return match.group(1) if match else " "
