"""Jupyter notebooks (.ipynb, nbformat 4): the code cells, in order, are one program.

- Only code cells change; raw and markdown cells, outputs, execution counts, metadata and the
  JSON layout are kept byte for byte (`layout.py`).
- IPython syntax (magics, `!shell`, `x?`) is kept and hidden from the analysis (`magics.py`).
- Findings name the cell: `nb.ipynb:cell 3:2:5: MIG005 ...` (cells counted from 1 among all
  the notebook's cells, as ruff does); diffs have one section per changed cell.
- A notebook in another language (kernelspec / language_info) is skipped with a note; a cell
  that does not parse is an error naming the cell.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from migrator.engine import FileResult, MigrationError, decode, migrate_bytes
from migrator.findings import Finding
from migrator.notebook.magics import split_lines
from migrator.notebook.program import Notebook, NotebookError, Program


@dataclass
class NotebookFinding(Finding):
    cell: int = 0  # 1-based among all cells; line and col are within the cell

    def render(self, path: str) -> str:
        return super().render(f"{path}:cell {self.cell}")

    def to_json(self) -> dict:
        return {**super().to_json(), "cell": self.cell}


@dataclass
class NotebookResult(FileResult):
    note: str | None = None  # why it was skipped, for the user (another language)


def migrate_notebook(data: bytes, path: str, options) -> NotebookResult:
    """The notebook's bytes through the engine, as migrate_bytes does for a .py file."""
    result = NotebookResult(path=path, source=data)
    try:
        notebook = Notebook.parse(data)
        if not notebook.language.lower().startswith("python"):
            result.skipped = True
            result.note = f"a {notebook.language} notebook, not Python; skipped"
            return result
        program = notebook.program()
        inner = migrate_bytes(program.text.encode("utf-8"), path, options)
        result.skipped = inner.skipped
        if inner.error is not None:
            result.error = _locate(inner.error, program)
            return result
        result.findings = [_in_cell(finding, program) for finding in inner.findings]
        if inner.changed:
            sources = program.split(decode(inner.migrated)[0])
            result.migrated = notebook.with_sources(sources)
    except (NotebookError, MigrationError) as error:
        result.error = str(error)
    except Exception as error:  # noqa: BLE001 - one bad notebook must not stop the run
        result.error = f"internal error: {type(error).__name__}: {error}"
    return result


def cell_diff(path: str, before: bytes, after: bytes) -> str:
    """A unified diff per changed code cell, labelled `path:cell N`."""
    old, new = Notebook.parse(before), Notebook.parse(after)
    sources = {cell.number: cell.source for cell in new.code_cells}
    out = []
    for cell in old.code_cells:
        changed = sources.get(cell.number, cell.source)
        if changed == cell.source:
            continue
        label = f"{path}:cell {cell.number}"
        lines = difflib.unified_diff(
            _lines(cell.source),
            _lines(changed),
            fromfile=label,
            tofile=label,
        )
        out += lines
    return "".join(out)


def _lines(source: str) -> list[str]:
    """A cell's lines, the last one ending with a newline too (Jupyter shows no difference)."""
    return [line if line.endswith("\n") else line + "\n" for line in split_lines(source)]


def _in_cell(finding: Finding, program: Program) -> NotebookFinding:
    cell, line = program.position(finding.line)
    return NotebookFinding(
        code=finding.code,
        message=finding.message,
        level=finding.level,
        line=line,
        col=finding.col,
        cell=cell,
        by_hand=finding.by_hand,
    )


def _locate(error: str, program: Program) -> str:
    """`... (line 12, column 5)` of the program -> `... (cell 3, line 2, column 5)`."""

    def cell_position(match: re.Match) -> str:
        cell, line = program.position(int(match.group(1)))
        return f"(cell {cell}, line {line}, column"

    return re.sub(r"\(line (\d+), column", cell_position, error)


__all__ = ["NotebookFinding", "NotebookResult", "cell_diff", "migrate_notebook"]
