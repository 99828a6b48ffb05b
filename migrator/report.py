"""Everything the user sees: diffs (stdout), findings and messages (stderr), the rules table.

rich colours only when the stream is a terminal; plain text when piped.
"""

from __future__ import annotations

import difflib
import sys
from typing import Optional, TextIO

from migrator.engine import FileResult


def _console(stream: TextIO):
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=True)


def unified_diff(result: FileResult) -> str:
    before = _text(result.source)
    after = _text(result.migrated or result.source)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=result.path,
        tofile=result.path,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _text(data: bytes) -> str:
    from migrator.engine import decode

    try:
        return decode(data)[0]
    except Exception:  # noqa: BLE001 - diffs of undecodable input are never requested
        return data.decode("utf-8", "replace")


def print_diff(result: FileResult, stream: Optional[TextIO] = None) -> None:
    stream = stream or sys.stdout
    text = unified_diff(result)
    if not stream.isatty():
        stream.write(text)
        return
    console = _console(stream)
    for line in text.splitlines():
        style = None
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        console.print(line, style=style, markup=False)


def print_findings(result: FileResult, stream: Optional[TextIO] = None) -> None:
    stream = stream or sys.stderr
    for finding in result.findings:
        stream.write(finding.render(result.path) + "\n")


def print_error(path: str, message: str, stream: Optional[TextIO] = None) -> None:
    (stream or sys.stderr).write(f"{path}: error: {message}\n")


def print_message(message: str, stream: Optional[TextIO] = None) -> None:
    (stream or sys.stderr).write(message + "\n")


def print_rules_table(stream: Optional[TextIO] = None) -> None:
    from migrator.rules import ALL_RULES
    from migrator.rules.catalogue import FINDING_CODES

    rows = [(rule.code, rule.name, rule.summary) for rule in ALL_RULES]
    rows += [(code, "finding", summary) for code, summary in FINDING_CODES.items()]
    stream = stream or sys.stdout
    if not stream.isatty():
        width = max(len(name) for _, name, _ in rows)
        for code, name, summary in rows:
            stream.write(f"{code}  {name.ljust(width)}  {summary}\n")
        return
    from rich.table import Table

    table = Table(title="migrate rules")
    for column in ("code", "name", "what it does"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    _console(stream).print(table)
