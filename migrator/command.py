"""The default command's work: files in, results out, one exit code. The CLI only parses.

configuration -> discovery -> runner (prefilter and cache here, analysis in a pool) ->
results sorted by path -> diffs / messages / writes -> JSON and summary -> exit code
(exit_codes.py decides).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from migrator import report
from migrator.exit_codes import EXIT_ERROR, exit_code

STDIN = "-"
PROGRESS_MIN_FILES = 200  # a progress bar only for runs long enough to want one


@dataclass
class FixRequest:
    paths: list[str]
    mode: str | None  # diff | check | write; None: the default (diff; source for stdin)
    target: str | None = None  # None: from the configuration, else runtime
    select: str | None = None
    ignore: str | None = None
    stdin_filename: str | None = None
    output_format: str = "text"
    quiet: bool = False
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool = False
    jobs: int | None = None
    no_cache: bool = False
    cache_dir: str | None = None  # None: $MIGRATE_CACHE_DIR, the configuration, the default


def run_fix(request: FixRequest) -> int:
    started = time.perf_counter()
    from migrator.config import ConfigError, load_config
    from migrator.selection import SelectionError, parse_selection

    try:
        config = load_config(request.paths or ["."])
        rules = parse_selection(
            request.select if request.select is not None else config.select,
            request.ignore if request.ignore is not None else config.ignore,
        )
    except ConfigError as error:
        report.print_message(str(error))
        return EXIT_ERROR
    except SelectionError as error:
        report.print_message(f"migrate: error: {error}")
        return EXIT_ERROR
    from migrator.engine import Options

    options = Options(target=request.target or config.target or "runtime", rules=rules)
    if STDIN in request.paths:
        if len(request.paths) != 1:
            report.print_message("migrate: error: `-` (stdin) cannot be mixed with paths")
            return EXIT_ERROR
        return _run_stdin(request, options)
    from migrator.discovery import DiscoverySettings, discover

    settings = DiscoverySettings(
        exclude=request.exclude if request.exclude is not None else config.exclude,
        extend_exclude=[*config.extend_exclude, *request.extend_exclude],
        force_exclude=request.force_exclude or config.force_exclude,
        root=config.root,
    )
    found = discover(request.paths, settings)
    from migrator.runner import default_jobs, run_files

    cache = _open_cache(request, config, options) if found.files else None
    jobs = request.jobs or config.jobs or default_jobs()
    with report.progress(len(found.files), enabled=_wants_progress(request, found.files)) as tick:
        outcome = run_files(found.files, options, jobs, on_progress=tick, cache=cache)
    if cache is not None:
        from migrator.cache import prune

        prune(cache)
    from migrator.program.runs import group_programs

    single = len(found.files) == 1 and len(request.paths) == 1
    run = group_programs(outcome.results, options, single)
    results = sorted(run.results, key=lambda r: r.path)
    return _report(request, results, found.problems, started, cached=outcome.cached, run=run)


def _open_cache(request: FixRequest, config, options):
    if request.no_cache:
        return None
    from migrator.cache import cache_directory, open_cache

    directory = cache_directory(request.cache_dir, config.cache_dir, config.root)
    warn = None if request.quiet else report.print_message
    return open_cache(directory, options, warn=warn)


def _wants_progress(request: FixRequest, files: list[Path]) -> bool:
    return not request.quiet and len(files) >= PROGRESS_MIN_FILES and sys.stderr.isatty()


def _report(
    request: FixRequest, results, problems, started: float, cached: int = 0, run=None
) -> int:
    from migrator.writer import WriteError, write_atomically

    mode = request.mode or "diff"
    summary = report.Summary(mode=mode, scanned=len(results), cached=cached)
    if run is not None:
        summary.programs, summary.included = len(run.programs), len(run.included)
    program_errors = _write_programs(run, results) if mode == "write" and run else {}
    for path, message in problems:
        report.print_error(path, message)
        summary.errors += 1
    pending = 0
    for result in results:
        if result.error is not None:
            summary.errors += 1
            report.print_error(result.path, result.error)
            continue
        summary.count(result)
        if not request.quiet:
            report.print_note(result)
        report.print_findings(result)
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
                if result.path in program_errors:
                    raise WriteError(program_errors[result.path])
                if run is None or run.program_of(result.path) is None:
                    write_atomically(Path(result.path), result.migrated, expected=result.source)
            except WriteError as error:
                summary.errors += 1
                summary.changed -= 1
                result.error = str(error)
                report.print_error(result.path, str(error))
                continue
            if not request.quiet:
                report.print_message(f"migrated {result.path}")
    summary.seconds = time.perf_counter() - started
    if request.output_format == "json":
        report.print_json(results, summary)
    if not request.quiet:
        report.print_summary(summary)
    findings = sum(1 for r in results for f in r.findings if f.needs_human)
    return exit_code(errors=summary.errors, findings=findings, pending_changes=pending)


def _write_programs(run, results) -> dict[str, str]:
    """Each program's files written together (all or none); {path: error}."""
    from migrator.program.runs import write_program

    errors: dict[str, str] = {}
    by_path = {r.path: r for r in results}
    for paths in run.programs:
        errors.update(write_program([by_path[p] for p in paths if p in by_path]))
    return errors


def _run_stdin(request: FixRequest, options) -> int:
    from migrator.runner import migrate_file

    name = request.stdin_filename or "<stdin>"
    data = sys.stdin.buffer.read()
    result = migrate_file(data, name, options)  # a notebook when --stdin-filename says so
    if result.error is not None:
        report.print_error(name, result.error)
        return EXIT_ERROR
    report.print_findings(result)
    findings = sum(1 for f in result.findings if f.needs_human)
    if request.output_format == "json":
        summary = report.Summary(mode=request.mode or "source", scanned=1)
        summary.count(result)
        report.print_json([result], summary)
        return exit_code(errors=0, findings=findings, pending_changes=int(result.changed))
    if request.mode == "diff":
        report.print_diff(result)
        return exit_code(errors=0, findings=findings, pending_changes=int(result.changed))
    if request.mode == "check":
        return exit_code(errors=0, findings=findings, pending_changes=int(result.changed))
    sys.stdout.buffer.write(result.migrated if result.changed else data)
    sys.stdout.flush()
    return exit_code(errors=0, findings=findings, pending_changes=0)
