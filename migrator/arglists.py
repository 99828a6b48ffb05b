"""Comma-separated lists in the source — a call's arguments, a `def`'s parameters, an import's
names — as items that rules can drop, add or re-punctuate without touching the rest.

An item is its (edited) text, then either its comma with the whitespace and comments around
it, or, for a last item without one, the whitespace before the closing bracket. Dropping a
comma drops that whitespace with it; an item that needs a comma and has none gets ", ".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.syntax.views import call_args
from migrator.source import Source, skip_space_and_comments


@dataclass
class Item:
    text: str
    comma: str | None  # the comma with its whitespace, as written
    tail: str = ""  # without a comma: the whitespace before the closing bracket
    node: object = None


@dataclass
class ItemList:
    head: str  # everything up to and including the opening bracket
    lead: str  # the whitespace after the opening bracket
    items: list[Item] = field(default_factory=list)
    close: str = ")"

    def render(self) -> str:
        parts = [self.head, self.lead]
        last = len(self.items) - 1
        for position, item in enumerate(self.items):
            parts.append(item.text)
            if item.comma is not None:
                parts.append(item.comma)
            else:
                parts.append(item.tail)
                if position != last:
                    parts.append(", ")
        parts.append(self.close)
        return "".join(parts)

    def without(self, positions: set[int]) -> ItemList:
        """The list without the items at `positions`; a new last item takes the old last's
        comma and trailing whitespace (a removed trailing comma leaves none)."""
        kept = [item for i, item in enumerate(self.items) if i not in positions]
        last = self.items[-1] if self.items else None
        if kept and kept[-1] is not last:
            kept[-1] = Item(kept[-1].text, last.comma, last.tail, kept[-1].node)
        return ItemList(self.head, self.lead, kept, self.close)

    def with_last_comma_dropped(self) -> ItemList:
        """The last item loses its comma (and the whitespace after it); its own trailing
        whitespace stays."""
        if not self.items:
            return self
        last = self.items[-1]
        items = [*self.items[:-1], Item(last.text, None, last.tail if last.comma is None else "",
                                        last.node)]  # fmt: skip
        return ItemList(self.head, self.lead, items, self.close)

    def appended(self, text: str) -> ItemList:
        """The list with `text` as a new last item, after the old last (whose trailing comma
        goes); whitespace the old last had before the closing bracket (`unit='img'\n    )`)
        now follows the new item, so the bracket stays where it was."""
        items = self.with_last_comma_dropped().items
        tail = ""
        if items:
            last = items[-1]
            tail = last.tail
            items = [*items[:-1], Item(last.text, None, "", last.node)]
        return ItemList(self.head, self.lead, [*items, Item(text, None, tail)], self.close)


def has_comma(gap: str) -> bool:
    index = 0
    while index < len(gap):
        char = gap[index]
        if char == "#":
            while index < len(gap) and gap[index] not in "\r\n":
                index += 1
            continue
        if char == ",":
            return True
        index += 1
    return False


def split_items(text: str, head_end: int, close: int, spans, texts, nodes) -> tuple[str, list]:
    """(lead, items) of the list between `head_end` (after the opening bracket) and `close`."""
    if not spans:
        return text[head_end:close], []
    lead = text[head_end : spans[0][0]]
    items = []
    for position, ((_, end), item_text) in enumerate(zip(spans, texts)):
        following = spans[position + 1][0] if position + 1 < len(spans) else close
        gap = text[end:following]
        if has_comma(gap):
            items.append(Item(item_text, gap, "", nodes[position]))
        else:
            items.append(Item(item_text, None, gap, nodes[position]))
    return lead, items


def argument_spans(renderer, call: ast.Call) -> list[tuple[int, int]]:
    source = renderer.source
    spans = []
    for arg in call_args(call):
        start, end = renderer.expression_span(arg.value, parens=True)
        if arg.node is not arg.value:  # `*x`, `**x`, `k=x`: from the star or the keyword
            start = source.start(arg.node)
            end = max(end, source.end(arg.node))
        spans.append((start, end))
    return spans


def call_items(renderer, call: ast.Call, func_text: str | None = None) -> ItemList:
    """The arguments of `call` (with their edits), between its brackets; the head is the
    called expression (or `func_text` instead) up to the opening bracket."""
    source = renderer.source
    text = source.text
    func_start, func_end = source.own_span(call.func)
    open_paren = skip_space_and_comments(text, func_end)
    close = source.end(call) - 1
    spans = argument_spans(renderer, call)
    texts = [renderer.span_text(start, end) for start, end in spans]
    lead, items = split_items(text, open_paren + 1, close, spans, texts, call_args(call))
    if func_text is None:
        func_text = renderer.span_text(func_start, func_end)
    return ItemList(func_text + text[func_end : open_paren + 1], lead, items, ")")


def parameter_items(renderer, function) -> ItemList:
    """The parameters of a `def` (with their edits), between its parentheses."""

    source = renderer.source
    text = source.text
    open_paren, close = parameter_parens(source, function)
    arguments = function.args
    spans, nodes = [], []
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    entries = list(zip(positional, defaults))
    if arguments.vararg is not None:
        entries.append((arguments.vararg, None))
    entries += list(zip(arguments.kwonlyargs, arguments.kw_defaults))
    if arguments.kwarg is not None:
        entries.append((arguments.kwarg, None))
    starred = {id(a) for a in (arguments.vararg, arguments.kwarg) if a is not None}
    for arg, default in entries:
        start = source.start(arg)
        if id(arg) in starred:  # `*args`, `**kwargs`: from the stars
            while text[start - 1] in " \t":
                start -= 1
            while text[start - 1] == "*":
                start -= 1
        end = source.own_span(default)[1] if default is not None else source.end(arg)
        spans.append((start, end))
        nodes.append(arg)
    spans, nodes = _with_markers(text, open_paren + 1, close, spans, nodes)
    texts = [renderer.span_text(start, end) for start, end in spans]
    lead, items = split_items(text, open_paren + 1, close, spans, texts, nodes)
    return ItemList("", lead, items, "")


def _with_markers(text: str, start: int, close: int, spans, nodes):
    """Add the `/` and bare `*` markers (no ast node) between parameters as items."""
    bounds = [start, *(e for _, e in spans)]
    found_spans, found_nodes = [], []
    for position, (span, node) in enumerate(zip([*spans, None], [*nodes, None])):
        gap_start = bounds[position]
        gap_end = span[0] if span is not None else close
        index = gap_start
        while index < gap_end:
            char = text[index]
            if char == "#":
                while index < gap_end and text[index] not in "\r\n":
                    index += 1
                continue
            if char in "/*":
                found_spans.append((index, index + 1))
                found_nodes.append(char)
            index += 1
        if span is not None:
            found_spans.append(span)
            found_nodes.append(node)
    return found_spans, found_nodes


def parameter_parens(source: Source, function) -> tuple[int, int]:
    """Offsets of the `(` and `)` around a `def`'s parameters."""
    text = source.text
    index = source.start(function)
    index = text.index("def", index) + 3
    index = skip_space_and_comments(text, index)
    while index < len(text) and (text[index].isalnum() or text[index] == "_" or ord(text[index])
                                 > 127):  # fmt: skip
        index += 1
    open_paren = skip_space_and_comments(text, index)
    arguments = function.args
    nodes = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    nodes += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    nodes += [d for d in (*arguments.defaults, *arguments.kw_defaults) if d is not None]
    last = max((source.own_span(n)[1] if isinstance(n, ast.expr) else source.end(n)
                for n in nodes), default=open_paren + 1)  # fmt: skip
    close = last
    while text[close] != ")":
        if text[close] == "#":
            while text[close] not in "\r\n":
                close += 1
        close += 1
    return open_paren, close
