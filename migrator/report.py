"""Everything the user sees: diffs (stdout), findings and messages (stderr), the rules table.

rich colours only when the stream is a terminal; plain text when piped.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

from migrator.engine import FileResult


def _console(stream: TextIO):
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=True)


def unified_diff(result: FileResult) -> str:
    import difflib  # here, as json below: `--check` (pre-commit's run) needs neither

    from migrator.discovery import NOTEBOOK_SUFFIX

    if result.path.endswith(NOTEBOOK_SUFFIX) and result.migrated is not None:
        from migrator.notebook import cell_diff

        return cell_diff(result.path, result.source, result.migrated)
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


def print_diff(result: FileResult, stream: TextIO | None = None) -> None:
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


def print_findings(result: FileResult, stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    for finding in result.findings:
        stream.write(finding.render(result.path) + "\n")


def print_note(result: FileResult, stream: TextIO | None = None) -> None:
    """Why a file was skipped, when the user should know (a notebook in another language)."""
    note = getattr(result, "note", None)
    if note:
        (stream or sys.stderr).write(f"{result.path}: {note}\n")


def print_error(path: str, message: str, stream: TextIO | None = None) -> None:
    (stream or sys.stderr).write(f"{path}: error: {message}\n")


def print_message(message: str, stream: TextIO | None = None) -> None:
    (stream or sys.stderr).write(message + "\n")


def print_rules_table(stream: TextIO | None = None) -> None:
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


# -- bulk runs: summary, JSON, progress ------------------------------------------------------
@dataclass
class Summary:
    mode: str
    scanned: int = 0
    skipped: int = 0  # rejected by the prefilter: never parsed
    changed: int = 0
    errors: int = 0
    findings: Counter = field(default_factory=Counter)  # code -> count
    seconds: float = 0.0
    cached: int = 0  # answered by the verdict cache
    programs: int = 0  # programs of several files migrated as units (migrator/program.py)
    included: int = 0  # files of those programs outside the paths the run was given

    def count(self, result: FileResult) -> None:
        self.skipped += int(result.skipped)
        self.changed += int(result.changed)
        self.findings.update(f.code for f in result.findings)

    def to_json(self) -> dict:
        return {
            "mode": self.mode,
            "scanned": self.scanned,
            "skipped_by_prefilter": self.skipped,
            "changed": self.changed,
            "errors": self.errors,
            "findings": dict(sorted(self.findings.items())),
            "cached": self.cached,
            "programs": self.programs,
            "included": self.included,
            "seconds": round(self.seconds, 3),
        }


def print_summary(summary: Summary, stream: TextIO | None = None) -> None:
    verb = "migrated" if summary.mode == "write" else "would migrate"
    noun = "file" if summary.scanned == 1 else "files"
    parts = [
        f"{summary.scanned} {noun} scanned",
        f"{summary.skipped} skipped by prefilter",
        f"{verb} {summary.changed}",
    ]
    if summary.programs:
        noun = "program" if summary.programs == 1 else "programs"
        parts[0] += f" ({summary.programs} multi-file {noun}"
        parts[0] += f", {summary.included} file{'' if summary.included == 1 else 's'} included)"
        parts[0] = parts[0].replace(", 0 files included)", ")")
    if summary.findings:
        by_code = ", ".join(f"{code} x{n}" for code, n in sorted(summary.findings.items()))
        parts.append(f"findings: {by_code}")
    else:
        parts.append("no findings")
    parts.append(f"{summary.errors} error{'' if summary.errors == 1 else 's'}")
    print_message(", ".join(parts) + f" in {summary.seconds:.2f}s", stream)


def print_json(results: list[FileResult], summary: Summary, stream: TextIO | None = None) -> None:
    """Per-file results and findings, and the summary, as one JSON document on stdout."""
    import json

    stream = stream or sys.stdout
    files = []
    for result in results:
        entry = {
            "path": result.path,
            "status": _status(result, summary.mode),
            "changed": result.changed,
            "skipped": result.skipped,
            "error": result.error,
            "findings": [f.to_json() for f in result.findings],
        }
        if getattr(result, "note", None):
            entry["note"] = result.note
        if getattr(result, "program", None):
            entry["program"] = result.program  # migrated with the program of this entry
        if result.changed and summary.mode == "diff":
            entry["diff"] = unified_diff(result)
        files.append(entry)
    json.dump(
        {"mode": summary.mode, "files": files, "summary": summary.to_json()}, stream, indent=2
    )
    stream.write("\n")
    stream.flush()


def _status(result: FileResult, mode: str) -> str:
    if result.error is not None:
        return "error"
    if result.skipped:
        return "skipped"
    if result.changed:
        return "migrated" if mode == "write" else "would-migrate"
    return "unchanged"


@contextmanager
def progress(total: int, enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr (transient) when enabled; yields the update callback."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(sys.stderr),
        transient=True,
        auto_refresh=False,  # no refresh thread: the process pool forks after this starts
    )
    with bar:
        task = bar.add_task("migrate", total=total)

        def update(done: int, _total: int) -> None:
            bar.update(task, completed=done, refresh=True)

        yield update
