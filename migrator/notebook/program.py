"""A notebook's code cells as one program, and the migrated program back into cells.

The program is the code cells' sources in order, each ending with a newline, with IPython
syntax masked (`magics.py`). After migration, the original and migrated programs are compared
line by line (difflib): a line kept stays in its cell; in a block of replaced lines, a new line
similar to an old one is its rewrite and stays in that line's cell, and the others are
insertions; an insertion goes to the cell of the line before it, so at a boundary to the end
of the earlier cell (imports and `accelerator = Accelerator()` follow the imports cell;
`prepare` follows the cell that made the objects), except an inserted block header (`with
accelerator.main_process_first():` around a download that opens a cell), which goes to the
cell of the body it wraps. Moving a statement across a boundary never changes what the cells
do when run top to bottom. Every changed cell
must parse on its own and every masked line must come back exactly once, or the notebook is
an internal error (never a half-migrated notebook).
"""

from __future__ import annotations

import ast
import difflib
import json
from dataclasses import dataclass, field

from migrator.notebook import layout
from migrator.notebook.magics import Masker, parses, split_lines

SIMILAR = 0.6  # difflib ratio from which a new line is a rewrite of an old one


class NotebookError(Exception):
    """A notebook we cannot migrate; the message is the cause."""


@dataclass
class CodeCell:
    number: int  # 1-based position among all the notebook's cells, as diagnostics name it
    source: str  # the cell's code, joined
    as_list: bool  # stored as a list of lines (else one string)
    masked: str = ""  # the code with IPython syntax masked
    indent: str = ""  # the indent IPython takes off a cell whose first line is indented


@dataclass
class Notebook:
    text: str
    bom: bool
    cells: list
    code_cells: list[CodeCell]
    language: str

    @classmethod
    def parse(cls, data: bytes) -> Notebook:
        try:
            text, bom = layout.decode(data)
            document = json.loads(text)
        except (layout.LayoutError, json.JSONDecodeError) as error:
            raise NotebookError(f"cannot read notebook: invalid JSON ({error})") from None
        if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
            raise NotebookError("cannot read notebook: no list of cells (not nbformat 4)")
        if document.get("nbformat") != 4:
            version = document.get("nbformat", "unknown")
            raise NotebookError(f"cannot read notebook: nbformat {version} (only 4 is supported)")
        cells = document["cells"]
        code = []
        for index, cell in enumerate(cells):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            if isinstance(source, list) and all(isinstance(line, str) for line in source):
                code.append(CodeCell(index + 1, "".join(source), as_list=True))
            elif isinstance(source, str):
                code.append(CodeCell(index + 1, source, as_list=False))
            else:
                raise NotebookError(f"cannot read notebook: cell {index + 1} has no source text")
        return cls(text, bom, cells, code, _language(document))

    def program(self) -> Program:
        masker = Masker()
        for cell in self.code_cells:
            cell.masked = masker.mask(cell.source)
            try:
                ast.parse(cell.masked)
            except SyntaxError as error:
                dedented, indent = _dedented(cell.masked)
                if indent and parses(dedented):  # IPython's `leading_indent` transform
                    cell.masked, cell.indent = dedented, indent
                    continue
                where = f"line {error.lineno}, column {error.offset}" if error.lineno else "?"
                raise NotebookError(
                    f"cannot parse cell {cell.number}: {error.msg} ({where})"
                ) from None
        return Program(self.code_cells, masker)

    def with_sources(self, sources: dict[int, str]) -> bytes:
        """The notebook's bytes with these code cells' (by number) sources replaced."""
        spans = layout.source_spans(self.text)
        ascii_only = layout.writes_ascii_only(self.text)
        replacements = {}
        for cell in self.code_cells:
            new = sources.get(cell.number)
            if new is None or new == cell.source:
                continue
            span = spans[cell.number - 1]
            value = split_lines(new) if cell.as_list else new
            replacements[span] = layout.render_source(value, self.text, span, ascii_only)
        return layout.encode(layout.splice(self.text, replacements), self.bom)


@dataclass
class Program:
    cells: list[CodeCell]
    masker: Masker
    lines: list[str] = field(default_factory=list)  # masked, each ending with a newline
    origin: list[tuple[int, int]] = field(default_factory=list)  # (cell ordinal, line in cell)

    def __post_init__(self) -> None:
        for ordinal, cell in enumerate(self.cells):
            for number, line in enumerate(split_lines(cell.masked)):
                self.lines.append(line if line.endswith("\n") else line + "\n")
                self.origin.append((ordinal, number + 1))

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def position(self, line: int) -> tuple[int, int]:
        """(cell number, line in the cell) of a 1-based line of the program."""
        if not 1 <= line <= len(self.origin):
            return (self.cells[0].number if self.cells else 1), line
        ordinal, in_cell = self.origin[line - 1]
        return self.cells[ordinal].number, in_cell

    def split(self, migrated: str) -> dict[int, str]:
        """The migrated program as {cell number: source}, magics restored."""
        new_lines = [line if line.endswith("\n") else line + "\n" for line in split_lines(migrated)]
        owner = self._owners(new_lines)
        per_cell: list[list[str]] = [[] for _ in self.cells]
        seen: set[int] = set()
        for line, ordinal in zip(new_lines, owner):
            restored, number = self.masker.restore(line)
            if number is not None:
                if number in seen:
                    raise NotebookError("internal error: a magic line was duplicated")
                seen.add(number)
            elif restored.strip():  # the indent IPython took off, back on
                restored = self.cells[ordinal].indent + restored
            per_cell[ordinal].append(restored)
        if len(seen) != len(self.masker.originals):
            raise NotebookError("internal error: a magic line was lost")
        sources = {}
        for cell, lines in zip(self.cells, per_cell):
            source = "".join(lines)
            if source.endswith("\n") and not cell.source.endswith("\n"):
                source = source[:-1]
            if cell.indent and _dedented(source)[0] == _dedented(cell.source)[0]:
                source = cell.source  # its code unchanged (lines without the indent kept so)
            if source != cell.source:
                masked = Masker().mask(source)
                try:
                    ast.parse(_dedented(masked)[0] if cell.indent else masked)
                except SyntaxError:
                    raise NotebookError(
                        f"internal error: the migration of cell {cell.number} does not parse "
                        "on its own"
                    ) from None
            sources[cell.number] = source
        return sources

    def _owners(self, new_lines: list[str]) -> list[int]:
        """The code cell (ordinal) each migrated line belongs to."""
        owners: list[int] = []
        inserted: list[bool] = []  # placed at a boundary, at the end of the earlier cell
        cell_of = [ordinal for ordinal, _ in self.origin]
        matcher = difflib.SequenceMatcher(None, self.lines, new_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                owners += cell_of[i1:i2]
                inserted += [False] * (i2 - i1)
            elif tag == "insert":
                owners += [self._insertion_cell(i1)] * (j2 - j1)
                inserted += [True] * (j2 - j1)
            elif tag == "replace":
                owners += self._replacement_owners(i1, i2, new_lines[j1:j2], inserted)
        return _headers_with_bodies(new_lines, owners, inserted)

    def _replacement_owners(
        self, i1: int, i2: int, new: list[str], inserted: list[bool]
    ) -> list[int]:
        """Cells for the `new` lines replacing original lines i1..i2: a line similar to an old
        line (at or after the previous match: order is kept) is its rewrite; others are
        insertions after the previous match, or at i1 (flagged in `inserted`)."""
        owners = []
        matched = None
        for line in new:
            stripped = line.strip()
            best, best_ratio = None, 0.0
            for index in range(i1 if matched is None else matched, i2 if stripped else i1):
                ratio = difflib.SequenceMatcher(None, self.lines[index].strip(), stripped).ratio()
                if ratio > best_ratio:
                    best, best_ratio = index, ratio
            if best is not None and best_ratio >= SIMILAR:
                matched = best
            owners.append(self._insertion_cell(i1) if matched is None else self.origin[matched][0])
            inserted.append(matched is None)
        return owners

    def _insertion_cell(self, before: int) -> int:
        """Lines inserted before original line `before` (0-based) go to the end of the earlier
        cell at a boundary."""
        if not self.origin:
            return 0
        if before == 0:
            return self.origin[0][0]
        return self.origin[before - 1][0]


def _headers_with_bodies(lines: list[str], owners: list[int], inserted: list[bool]) -> list[int]:
    """An inserted block header goes to the cell of the body it wraps (`with
    accelerator.main_process_first():` before a download that opens a cell), with the inserted
    comment lines right above it; else a cell would end with a header whose body opens the next
    one. From the last line up, so nested headers follow their inner header."""
    owners = list(owners)
    for at in range(len(lines) - 1, -1, -1):
        if not inserted[at] or not _opens_block(lines[at]):
            continue
        body = next((i for i in range(at + 1, len(lines)) if lines[i].strip()), None)
        if body is None or _indent(lines[body]) <= _indent(lines[at]):
            continue
        if owners[body] <= owners[at]:
            continue
        owners[at] = owners[body]
        above = at - 1
        while above >= 0 and inserted[above] and lines[above].lstrip().startswith("#"):
            owners[above] = owners[body]
            above -= 1
    return owners


def _opens_block(line: str) -> bool:
    """A compound statement's header with its body on the next lines (`with x:`, `if y:`)."""
    stripped = line.strip()
    if not stripped.endswith(":") or stripped.startswith("#"):
        return False
    try:
        ast.parse(stripped + "\n    pass\n")
    except SyntaxError:
        return False
    return True


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _language(document: dict) -> str:
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return "python"
    for key, field_name in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field_name), str):
            return section[field_name]
    return "python"


def _dedented(text: str) -> tuple[str, str]:
    """The cell without the indent of its first line, taken off every line that starts
    with it (what IPython's `leading_indent` input transform does before it compiles a
    cell; a line without it stays as it is), and that indent; ("", "") where the first line
    is not indented. Blank lines stay as they are. Putting the indent back on every line
    that is not blank gives a cell IPython reads alike (byte for byte when every line had
    it; `split` keeps a cell whose code did not change as it was)."""
    lines = text.splitlines(keepends=True)
    first = next((line for line in lines if line.strip()), "")
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    if not indent:
        return "", ""
    return "".join(
        line[len(indent) :] if line.strip() and line.startswith(indent) else line for line in lines
    ), indent
