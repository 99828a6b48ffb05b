"""The default command's work: files in, results out, one exit code. The CLI only parses."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from migrator import report
from migrator.engine import FileResult, Options, migrate_bytes
from migrator.exit_codes import EXIT_ERROR, exit_code
from migrator.writer import WriteError, write_atomically

STDIN = "-"


@dataclass
class FixRequest:
    paths: list[str]
    mode: Optional[str]  # diff | check | write; None: the default (diff; source for stdin)
    target: str
    rules: frozenset
    stdin_filename: Optional[str] = None
    output_format: str = "text"
    quiet: bool = False


def run_fix(request: FixRequest) -> int:
    options = Options(target=request.target, rules=request.rules)
    if STDIN in request.paths:
        if len(request.paths) != 1:
            report.print_message("migrate: error: `-` (stdin) cannot be mixed with paths")
            return EXIT_ERROR
        return _run_stdin(request, options)
    from migrator.discovery import DiscoveryError, discover

    try:
        files, problems = discover(request.paths)
    except DiscoveryError as error:
        report.print_message(f"migrate: error: {error}")
        return EXIT_ERROR
    for path, message in problems:
        report.print_error(path, message)
    mode = request.mode or "diff"
    results = [_migrate_path(path, options) for path in files]
    errors = len(problems)
    pending = 0
    findings = 0
    for result in results:
        if result.error is not None:
            errors += 1
            report.print_error(result.path, result.error)
            continue
        report.print_findings(result)
        findings += sum(1 for f in result.findings if f.level == "warning")
        if not result.changed:
            continue
        if mode == "diff":
            if request.output_format == "text":
                report.print_diff(result)
            pending += 1
        elif mode == "check":
            if not request.quiet:
                report.print_message(f"would migrate {result.path}")
            pending += 1
        else:
            try:
                write_atomically(Path(result.path), result.migrated)
            except WriteError as error:
                errors += 1
                report.print_error(result.path, str(error))
                continue
            if not request.quiet:
                report.print_message(f"migrated {result.path}")
    if request.output_format == "json":
        _print_json(results, mode)
    if not request.quiet:
        _summary(results, mode, errors)
    return exit_code(errors=errors, findings=findings, pending_changes=pending)


def _migrate_path(path: Path, options: Options) -> FileResult:
    try:
        data = path.read_bytes()
    except OSError as error:
        result = FileResult(path=str(path), source=b"")
        result.error = f"cannot read: {error.strerror or error}"
        return result
    return migrate_bytes(data, str(path), options)


def _run_stdin(request: FixRequest, options: Options) -> int:
    name = request.stdin_filename or "<stdin>"
    data = sys.stdin.buffer.read()
    result = migrate_bytes(data, name, options)
    if result.error is not None:
        report.print_error(name, result.error)
        return EXIT_ERROR
    report.print_findings(result)
    findings = sum(1 for f in result.findings if f.level == "warning")
    if request.mode == "diff":
        report.print_diff(result)
        return exit_code(errors=0, findings=findings, pending_changes=int(result.changed))
    if request.mode == "check":
        return exit_code(errors=0, findings=findings, pending_changes=int(result.changed))
    sys.stdout.buffer.write(result.migrated if result.changed else data)
    sys.stdout.flush()
    return exit_code(errors=0, findings=findings, pending_changes=0)


def _print_json(results: list[FileResult], mode: str) -> None:
    payload = {
        "mode": mode,
        "files": [
            {
                "path": r.path,
                "changed": r.changed,
                "skipped": r.skipped,
                "error": r.error,
                "findings": [f.to_json() for f in r.findings],
                **({"diff": report.unified_diff(r)} if r.changed and mode == "diff" else {}),
            }
            for r in results
        ],
    }
    json.dump(payload, sys.stdout, indent=2)
    sys.stdout.write("\n")


def _summary(results: list[FileResult], mode: str, errors: int) -> None:
    changed = sum(1 for r in results if r.changed)
    if not results and not errors:
        report.print_message("no Python files found; nothing to do")
        return
    verb = {"diff": "would migrate", "check": "would migrate", "write": "migrated"}[mode]
    noun = "file" if changed == 1 else "files"
    parts = [f"{verb} {changed} {noun}", f"{len(results) - changed} unchanged"]
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    report.print_message(", ".join(parts))
