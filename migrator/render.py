"""Applying an EditSet to the source: one pass, bottom-up, text in and text out.

Every edited thing is a *region* of the source: an expression (with or without its own
parentheses), a simple statement, a keyword argument, a `def`'s parameter list, a line, a
compound statement (decorators to the end of its last nested block), or a whole block whose
statements change (insertions, removals). Regions nest as the syntax does; a region's text is
the original text with its child regions' texts spliced in, then passed through its render
functions. A block region re-emits its statements one by one, dropping the comment lines
directly above a removed statement with it, carrying its other comments and blank lines to
the next statement kept (one run of blank lines where two meet), writing `pass` into a block
left empty (branches.py tidies an `if` some of whose branches emptied), and inserted
statements in the block's indentation and the file's newline.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from dataclasses import dataclass

from migrator.analysis.syntax.index import COMPOUND, Block, Line, ModuleIndex
from migrator.arglists import parameter_parens
from migrator.branches import branches_emptied, tidy_if
from migrator.edits import EditSet, NewStatement, ParamList
from migrator.layout import (
    BlockLayout,
    Layout,
    LeadingLine,
    blocks_in_order,
    first_offset,
    is_suite,
    semicolon_end,
)
from migrator.no_effect import does_nothing
from migrator.source import (
    Source,
    continuation_lines,
    skip_space,
    split_lines,
)

RANK_BLOCK, RANK_COMPOUND, RANK_LINE, RANK_SMALL, RANK_PART, RANK_EXPR, RANK_INNER = range(7)


@dataclass(eq=False)
class Region:
    start: int
    end: int
    rank: int
    node: object = None
    renders: list | None = None
    block: Block | None = None


class Renderer:
    """Renders the edited module; render functions get it as their second argument."""

    def __init__(self, source: Source, index: ModuleIndex, edits: EditSet) -> None:
        self.source = source
        self.index = index
        self.edits = edits
        self.layout = Layout(source)
        self.newline = source.newline
        self.emptied: set[int] = set()  # ids of blocks rendered without a statement
        self._cache: dict[int, str] = {}
        self._active: set[int] = set()
        self._layouts: dict[int, BlockLayout] = {}
        self._rebuilt: dict[int, tuple[list[str], str]] = {}
        self._whole: dict[int, Region] = {}
        self._inner: dict[int, Region] = {}
        self._block_regions: dict[int, Region] = {}
        self._blank = LeadingLine(self.newline, False)
        regions: list[Region] = []
        for renders_by_node, regions_by_node, inner in (
            (edits.replacements, self._whole, False),
            (edits.rewrites, self._inner, True),
        ):
            for key, renders in renders_by_node.items():
                node = edits.nodes[key]
                region = Region(*self.span_of(node, inner=inner), node, renders)
                regions_by_node[key] = region
                regions.append(region)
        for block in self._structural_blocks():
            regions.append(self._block_region(block))
        regions.sort(key=lambda r: (r.start, -r.end, r.rank))
        self.regions = regions
        self._starts = [r.start for r in regions]

    # -- the API render functions use -------------------------------------------------------
    def render(self) -> str:
        return self.span_text(0, len(self.source.text))

    def text_of(self, node, parens: bool = True) -> str:
        """A node's code with every edit inside it (and its own, if it has any) applied."""
        whole = self._whole.get(id(node))
        if whole is not None:
            return self._region_text(whole)
        inner = self._inner.get(id(node))
        if inner is not None and not parens:
            return self._region_text(inner)
        start, end, _ = self.span_of(node, inner=not parens)
        return self.span_text(start, end)

    def span_text(self, start: int, end: int) -> str:
        text = self.source.text
        pieces = []
        cursor = start
        regions = self.regions
        position = bisect_left(self._starts, start)
        while position < len(regions):
            region = regions[position]
            if region.start >= end:
                break
            position += 1
            if id(region) in self._active or region.end > end or region.start < cursor:
                continue
            pieces.append(text[cursor : region.start])
            pieces.append(self._region_text(region))
            cursor = region.end
        pieces.append(text[cursor:end])
        return "".join(pieces)

    @property
    def default_indent(self) -> str:
        """The file's first indented block's indentation (new blocks are written in it)."""
        for node in self.index.tree.body:
            for statements in blocks_in_order(node, self.layout.is_elif):
                if not is_suite(self.source, statements[0]):
                    return self.source.indentation(statements[0].lineno)
        return "    "

    def statements_of(self, block: Block) -> list[str]:
        """The texts (leading lines included) of a block's statements after the edits."""
        region = self._block_regions.get(id(block))
        if region is not None and block.kind != "suite":
            self._region_text(region)
            return list(self._rebuilt[id(block)][0])
        layout = self._layout(block)
        return [
            "".join(line.text for line in st.leading) + self.span_text(
                self.source.line_starts[st.first_line - 1], self.source.line_end(st.last_line)
            )
            for st in layout.statements
        ]  # fmt: skip

    def block_layout(self, block: Block) -> BlockLayout:
        return self._layout(block)

    def reindent(self, text: str, old: str, new: str) -> str:
        """`text` with the indentation `old` of its lines replaced by `new` (lines that start
        inside a string or after a backslash continuation are left as they are)."""
        if old == new:
            return text
        skip = continuation_lines(text)
        out = []
        for number, line in enumerate(split_lines(text), start=1):
            if number not in skip and line.startswith(old):
                line = new + line[len(old) :]
            out.append(line)
        return "".join(out)

    # -- regions ---------------------------------------------------------------------------
    def _region_text(self, region: Region) -> str:
        cached = self._cache.get(id(region))
        if cached is not None:
            return cached
        self._active.add(id(region))
        if region.block is not None:
            text = self._render_block(region.block)
        else:
            text = self.span_text(region.start, region.end)
            for render in region.renders:
                text = render(text, self)
        self._active.discard(id(region))
        self._cache[id(region)] = text
        return text

    def span_of(self, node, inner: bool) -> tuple[int, int, int]:
        source = self.source
        if isinstance(node, ast.expr):
            if inner:
                return (*self.expression_span(node, parens=False), RANK_INNER)
            return (*self.expression_span(node, parens=True), RANK_EXPR)
        if isinstance(node, ast.keyword):
            value_end = source.own_span(node.value)[1]
            return source.start(node), max(source.end(node), value_end), RANK_PART
        if isinstance(node, ParamList):
            open_paren, close_paren = parameter_parens(source, node.function)
            return open_paren + 1, close_paren, RANK_PART
        if isinstance(node, Line):
            start = source.start(node.body[0])
            return start, source.line_end(node.end_lineno), RANK_LINE
        if isinstance(node, COMPOUND):
            end = source.line_end(self.layout.last_line(node))
            return first_offset(source, node), end, RANK_COMPOUND
        return source.start(node), source.end(node), RANK_SMALL

    def expression_span(self, node: ast.expr, parens: bool) -> tuple[int, int]:
        if isinstance(node, ast.GeneratorExp):
            start, end = self.source.span(node)
            text = self.source.text
            if text[start] == "(" and self.source._opens_call(start):  # `f(x for x in y)`
                inner_start = skip_space(text, start + 1)
                inner_end = end - 1
                while inner_end > inner_start and text[inner_end - 1] in " \t\f\r\n\\":
                    inner_end -= 1
                return inner_start, inner_end
        return self.source.own_span(node) if parens else self.source.span(node)

    # -- blocks ----------------------------------------------------------------------------
    def _structural_blocks(self) -> list[Block]:
        edits, index = self.edits, self.index
        found: dict[int, Block] = dict(edits.blocks)
        for node in [*edits.removed.values(), *edits.cleaned.values()]:
            block = self._block_holding(node)
            if block is not None:
                found[id(block)] = block
        for key in edits.drop_if_emptied:
            statement = index.statement_of.get(key)
            if statement is not None:
                found[id(statement.block)] = statement.block
        for block in list(found.values()):  # an `if` whose branch may empty: tidy_if sees it
            if block.parent is not None and isinstance(block.parent.node, ast.If):
                found[id(block.parent.block)] = block.parent.block
        return list(found.values())

    def _block_holding(self, node) -> Block | None:
        statement = self.index.statement_of.get(id(node))
        if statement is None:
            line = self.index.small_line.get(id(node))
            statement = self.index.statement_of.get(id(line)) if line is not None else None
        return statement.block if statement is not None else None

    def _block_region(self, block: Block) -> Region:
        layout = self._layout(block)
        if block.kind == "suite":
            first = block.statements[0]
            start = self.source.start(first)
            end = semicolon_end(self.source, block.statements[-1])
        else:
            start, end = layout.start, layout.end
        region = Region(start, end, RANK_BLOCK, block=block)
        self._block_regions[id(block)] = region
        return region

    def _layout(self, block: Block) -> BlockLayout:
        found = self._layouts.get(id(block))
        if found is None:
            found = self._layouts[id(block)] = self.layout.block(block)
        return found

    def _render_block(self, block: Block) -> str:
        if block.kind == "suite":
            return self._render_suite(block)
        layout = self._layout(block)
        emitted, comments = self._rebuild(block, layout)
        if not emitted and block.kind == "body":
            self.emptied.add(id(block))
            emitted = [layout.indent + "pass" + self.newline]
        return "".join(emitted) + comments + layout.footer

    def _rebuild(self, block: Block, layout: BlockLayout) -> tuple[list[str], str]:
        emitted: list[str] = []
        carried: list[LeadingLine] = []
        removed_first = False  # statements at the top of the block were removed

        def emit(leading: list[LeadingLine], text: str) -> None:
            nonlocal carried
            if carried:
                leading = merge_leading(carried, leading, self._blank)
                carried = []
            if removed_first and not emitted and block.kind == "body":
                # No blank line opens an indented block where its first statements went.
                while leading and not leading[0].comment:
                    leading = leading[1:]
            emitted.append("".join(line.text for line in leading) + text)

        for position, statement in enumerate(layout.statements):
            for leading, text in self._inserted(block, position, layout.indent):
                emit(leading, text)
            text = self._statement_text(statement.node, statement.first_line,
                                        statement.last_line)  # fmt: skip
            if text is None:
                removed_first = removed_first or not emitted
                carried = merge_leading(carried, without_own_comment(statement.leading),
                                        self._blank)  # fmt: skip
            else:
                emit(statement.leading, text)
        for leading, text in self._inserted(block, len(layout.statements), layout.indent):
            emit(leading, text)
        comments = "".join(line.text for line in carried if line.comment)
        self._rebuilt[id(block)] = (emitted, comments)
        return emitted, comments

    def _inserted(self, block: Block, position: int, indent: str):
        entries = self.edits.insertions.get((id(block), position), [])
        for _, statement in sorted(entries, key=lambda entry: entry[0]):
            leading = [LeadingLine(self.newline, False)] if statement.blank_line_before else []
            yield leading, self.new_statement(statement, indent)

    def new_statement(self, statement: NewStatement, indent: str) -> str:
        lines = statement.code.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return "".join(indent + line + self.newline for line in lines)

    def _statement_text(self, node, first: int, last: int) -> str | None:
        edits = self.edits
        if id(node) in edits.removals:
            return None
        source = self.source
        start, end = source.line_starts[first - 1], source.line_end(last)
        if isinstance(node, Line):
            smalls = node.body
            kept = [small for small in smalls if self._kept_small(small)]
            if not kept:
                return None
            if len(kept) != len(smalls):
                return self._line_with(node, kept, start, end)
            return self.span_text(start, end)
        text = self.span_text(start, end)
        if id(node) in edits.drop_if_emptied and branches_emptied(self, node):
            return None
        tidied = tidy_if(self, node, start, end) if isinstance(node, ast.If) else None
        return text if tidied is None else tidied

    def _kept_small(self, small: ast.stmt) -> bool:
        if id(small) in self.edits.removals:
            return False
        if id(small) in self.edits.cleanups:
            return not does_nothing(self.span_text(*self.source.span(small)))
        return True

    def _line_with(self, line: Line, kept: list, start: int, end: int) -> str:
        source = self.source
        text = source.text
        smalls = line.body
        parts = [text[start : source.start(smalls[0])]]
        for position, small in enumerate(kept):
            parts.append(self.span_text(*source.span(small)))
            if position < len(kept) - 1:
                following = smalls[smalls.index(small) + 1]
                parts.append(text[source.end(small) : source.start(following)])
        tail_start = semicolon_end(self.source, smalls[-1])
        parts.append(text[tail_start:end])
        return "".join(parts)

    def _render_suite(self, block: Block) -> str:
        source = self.source
        smalls = block.statements
        kept = [small for small in smalls if self._kept_small(small)]
        if not kept:
            self.emptied.add(id(block))
            return "pass"
        parts = []
        for position, small in enumerate(kept):
            parts.append(self.span_text(*source.span(small)))
            if position < len(kept) - 1:
                following = smalls[smalls.index(small) + 1]
                parts.append(source.text[source.end(small) : source.start(following)])
        return "".join(parts)


def without_own_comment(leading: list[LeadingLine]) -> list[LeadingLine]:
    """The leading lines of a removed statement that stay: the comment lines directly above it
    (no blank line between them and it) described it and go with it (`# Device configuration`
    above `device = torch.device(...)`); comments after a blank line stay, as blank lines do."""
    end = len(leading)
    while end > 0 and leading[end - 1].comment:
        end -= 1
    return leading[:end]


def merge_leading(
    first: list[LeadingLine], second: list[LeadingLine], blank: LeadingLine
) -> list[LeadingLine]:
    """Concatenate leading lines, keeping one run of blank lines where the two meet."""
    if not first:
        return second
    if not second:
        return first
    tail = 0
    while tail < len(first) and not first[len(first) - 1 - tail].comment:
        tail += 1
    head = 0
    while head < len(second) and not second[head].comment:
        head += 1
    return [*first[: len(first) - tail], *([blank] * max(tail, head)), *second[head:]]
