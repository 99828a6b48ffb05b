"""Many files through the engine: cheap checks in this process, parsing and analysis in a
process pool.

The parent reads every file and runs the byte prefilter (0.2 s for 46 MB; with a cache, a file
the prefilter rejected before and whose size and mtime are unchanged is not read), then answers what
it can from the verdict cache (`migrator/cache.py`), so only the remaining candidates cross a
process boundary. Candidates go out largest first, in chunks (small files must not pay IPC one
by one), to workers started once; each worker stores its verdicts in the cache; results come
back in any order and are sorted by path by the caller. Workers ignore SIGINT: Ctrl-C reaches
the parent, which stops the pool. Notebooks skip the byte prefilter (their code is JSON-escaped
until `migrator/notebook` reads it) and go to the workers whole.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.discovery import NOTEBOOK_SUFFIX
from migrator.engine import FileResult, MigrationError, Options, decode, migrate_bytes

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from migrator.cache import VerdictCache

# A chunk holds at most this many bytes (or one larger file) and this many files.
CHUNK_BYTES = 256 * 1024
CHUNK_FILES = 64


@dataclass
class Candidate:
    path: str
    data: bytes
    key: str | None = None  # its cache entry, when the run has a cache

    @property
    def kind(self) -> str:
        return "notebook" if self.path.endswith(NOTEBOOK_SUFFIX) else "python"


@dataclass
class RunOutcome:
    results: list[FileResult] = field(default_factory=list)
    scanned: int = 0
    cached: int = 0  # answered by the cache


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def read_and_prefilter(path: Path, options: Options) -> tuple[FileResult | None, Candidate | None]:
    """(a finished result, None) or (None, a candidate for the engine) for one file."""
    from migrator import prefilter

    name = str(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        return FileResult(
            path=name, source=b"", error=f"cannot read: {error.strerror or error}"
        ), None
    if b"\0" in data:
        return FileResult(
            path=name, source=b"", error="cannot decode: binary file (contains NUL bytes)"
        ), None
    if name.endswith(NOTEBOOK_SUFFIX):
        return None, Candidate(name, data)
    if not prefilter.could_need_migration(data, options.rules):
        try:
            decode(data)  # undecodable files are errors wherever they are
        except MigrationError as error:
            return FileResult(path=name, source=b"", error=str(error)), None
        return FileResult(path=name, source=b"", skipped=True), None
    return None, Candidate(name, data)


def run_files(
    paths: list[Path],
    options: Options,
    jobs: int,
    on_progress: Callable[[int, int], None] | None = None,
    cache: VerdictCache | None = None,
) -> RunOutcome:
    """Migrate `paths`; results in no particular order. `on_progress(done, total)` per batch.
    With a `cache`, candidates it knows are answered from it and new verdicts are stored."""
    outcome = RunOutcome(scanned=len(paths))
    candidates: list[Candidate] = []
    rejected: dict[str, tuple[int, int]] = {}
    if cache is not None:
        from migrator.cache import entry_key

        rejected = cache.load_prefiltered()
        still_rejected: dict[str, tuple[int, int]] = {}
    for path in paths:
        if cache is not None:
            metadata = _metadata(path)
            if metadata is not None and rejected.get(metadata[0]) == metadata[1]:
                still_rejected[metadata[0]] = metadata[1]  # unchanged since it was rejected
                outcome.results.append(FileResult(path=str(path), source=b"", skipped=True))
                outcome.cached += 1
                continue
        result, candidate = read_and_prefilter(path, options)
        if cache is not None and metadata is not None and result is not None and result.skipped:
            still_rejected[metadata[0]] = metadata[1]
        if result is None and cache is not None:
            candidate.key = entry_key(candidate.kind, candidate.data)
            result = cache.load(candidate.key, candidate.path, candidate.data, candidate.kind)
            outcome.cached += result is not None
        if result is not None:
            outcome.results.append(result)
        else:
            candidates.append(candidate)
    if cache is not None:
        _update_prefiltered(cache, rejected, still_rejected, paths)
    total = len(paths)
    done = total - len(candidates)
    if on_progress is not None:
        on_progress(done, total)
    if not candidates:
        return outcome
    candidates.sort(key=lambda c: len(c.data), reverse=True)
    chunks = _chunks(candidates)
    workers = min(jobs, len(chunks))
    if workers <= 1:
        enabled = gc.isenabled()
        gc.disable()  # as in the workers: cycle collection between files, not during them
        gc.freeze()  # and of what a file left, not of every module imported so far
        try:
            for chunk in chunks:
                outcome.results.extend(migrate_chunk(chunk, options, cache))
                done += len(chunk)
                if on_progress is not None:
                    on_progress(done, total)
        finally:
            gc.unfreeze()
            if enabled:
                gc.enable()
        return outcome
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    context = _context()  # a pool only now: one file (pre-commit's run) never pays its import
    if context.get_start_method() == "fork":
        import migrator.rules  # noqa: F401 - the analysis and the rules, imported once for all workers
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_worker_init
    ) as pool:
        pending = {pool.submit(migrate_chunk, chunk, options, cache): chunk for chunk in chunks}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    chunk = pending.pop(future)
                    outcome.results.extend(_chunk_results(future, chunk))
                    done += len(chunk)
                if on_progress is not None:
                    on_progress(done, total)
        except BaseException:
            for future in pending:
                future.cancel()
            _stop_workers(pool)
            raise
    return outcome


def _metadata(path: Path) -> tuple[str, tuple[int, int]] | None:
    """(absolute path, (size, mtime_ns)) of a file, taken before it is read; None if unreadable."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return os.path.abspath(path), (stat.st_size, stat.st_mtime_ns)


def _update_prefiltered(cache, before: dict, rejected: dict, paths: list[Path]) -> None:
    """Keep the index's other files, replace what this run saw; write only when it changed."""
    seen = {os.path.abspath(path) for path in paths}
    after = {path: value for path, value in before.items() if path not in seen}
    after.update(rejected)
    if after != before:
        cache.store_prefiltered(after)


def migrate_chunk(
    chunk: list[Candidate], options: Options, cache: VerdictCache | None = None
) -> list[FileResult]:
    """The per-chunk work of a worker (top level: it is pickled by reference)."""
    results = []
    for candidate in chunk:
        result = migrate_file(candidate.data, candidate.path, options)
        if cache is not None and candidate.key is not None:
            cache.store(candidate.key, result)
        if not result.changed:
            result.source = b""  # nothing to diff or write: do not ship the bytes back
        results.append(result)
        if not result.skipped:
            gc.collect()  # an analysed file leaves cycles; collect between files, not during
    return results


def migrate_file(data: bytes, path: str, options: Options) -> FileResult:
    """One file's bytes through the engine; a notebook's code cells as one program."""
    if path.endswith(NOTEBOOK_SUFFIX):
        from migrator.notebook import migrate_notebook

        return migrate_notebook(data, path, options)
    return migrate_bytes(data, path, options)


def _chunk_results(future, chunk: list[Candidate]) -> list[FileResult]:
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001 - a dead worker (killed, out of memory)
        cause = f"internal error: worker process failed ({type(error).__name__}: {error})"
        return [FileResult(path=c.path, source=b"", error=cause) for c in chunk]


def _chunks(candidates: list[Candidate]) -> list[list[Candidate]]:
    chunks: list[list[Candidate]] = []
    current: list[Candidate] = []
    size = 0
    for candidate in candidates:
        if current and (size + len(candidate.data) > CHUNK_BYTES or len(current) >= CHUNK_FILES):
            chunks.append(current)
            current, size = [], 0
        current.append(candidate)
        size += len(candidate.data)
    if current:
        chunks.append(current)
    return chunks


def _context():
    import multiprocessing

    # fork: workers inherit the imported modules (no re-import per worker); elsewhere spawn.
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    gc.disable()  # re-enabled per file by migrate_chunk's explicit collections
    gc.freeze()  # the collections then scan what a file left (~0 ms), not every module (~5 ms)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    processes = list(getattr(pool, "_processes", {}).values())
    for process in processes:
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
