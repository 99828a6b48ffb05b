"""A content-hash cache of per-file verdicts, so that a repeated run costs little more than
reading the files (`--no-cache` turns it off).

Where: `.migrate_cache/` at the project root (the directory of the pyproject.toml with
`[tool.migrate]`, else the current directory), or `--cache-dir`, else `MIGRATE_CACHE_DIR`, else
`[tool.migrate] cache-dir`, in that order. The directory holds a `.gitignore` (`*`) and a
`CACHEDIR.TAG`, so neither git nor backup tools pick it up, and one folder per tool version:

    .migrate_cache/<version>/<environment>/<entry>

- **environment** = a digest of everything besides the file that decides a verdict: the cache
  format, the tool version, a fingerprint of the installed migrator code (sizes and mtimes of
  `migrator/**/*.py`, so an editable install being edited never serves stale verdicts), the
  Python version (the parser), the size and mtime of the installed entry point of each
  third-party package the engine runs (`RESULT_PACKAGES`), and every `Options` field (target, selected rules; not the mode: one entry serves
  `--check`, `--diff` and `--write`).
- **entry** = a digest of the file's kind (python or notebook), its bytes, and the digests of
  the files its result depends on (none today; when programs spanning several files are
  migrated as a unit, their sorted (path, digest) pairs join the key and nothing else changes).
  Entries are content-addressed: a copy of a file, or a file moved back, hits.

**Files the byte prefilter rejects** (most of a repository: no training code) have no entry;
they are answered by the environment's `prefiltered` index instead: path → (size, mtime in
ns) of every file the prefilter rejected, as ruff and black key their caches on file metadata.
A file whose size and mtime still match is not read at all on a warm run; any other file is
read and decided as on a cold run. The index only ever holds the prefilter's rejection, which
depends on the file's bytes and the options (both in the environment) and on nothing else.

An entry holds the verdict (skipped / findings / error / note) and, for a changed file, the
migrated bytes, so `--diff` and `--write` are answered too; a hit is keyed by the bytes just
read, and `--write` still refuses a file that changed before it is replaced. Internal errors
(a crashed rule, a dead worker) are not cached.

Safety: every entry is written to a temp file in its directory and renamed into place
(`os.replace`), so concurrent runs and the workers of one run never see half an entry; an
entry carries its full key and a checksum of its content, and anything unreadable, corrupt,
truncated or foreign is a miss, never an error. A cache directory that cannot be created or
written makes the run go on without writing (one warning). Environments unused for 30 days
are removed at the end of every run that uses the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from migrator import __version__
from migrator.engine import FileResult
from migrator.findings import Finding
from migrator.writer import WriteError, new_temp_file, replace_atomically

FORMAT = 1
MAGIC = b"migrate-cache 1\n"  # then the checksum of the rest, the header, the migrated bytes
DIRECTORY_NAME = ".migrate_cache"
ENVIRONMENT_VARIABLE = "MIGRATE_CACHE_DIR"
# Third-party packages whose code decides results; their installed files are fingerprinted.
# None since the engine works on CPython's `ast` (the Python version is in the fingerprint).
RESULT_PACKAGES: tuple[str, ...] = ()
PREFILTERED = "prefiltered"  # the index of files the byte prefilter rejected
UNUSED_SECONDS = 30 * 24 * 3600
PACKAGE = Path(__file__).resolve().parent  # the installed migrator, fingerprinted
GITIGNORE = b"# Automatically created by migrate.\n*\n"
CACHEDIR_TAG = (
    b"Signature: 8a477f597d28d172789f06886806bc55\n"
    b"# This file is a cache directory tag created by migrate.\n"
    b"# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def cache_directory(flag: str | None, configured: Path | None, root: Path | None) -> Path:
    """`--cache-dir`, else $MIGRATE_CACHE_DIR, else `[tool.migrate] cache-dir`, else
    `.migrate_cache` at the project root (the current directory without a configuration)."""
    chosen = flag or os.environ.get(ENVIRONMENT_VARIABLE) or configured
    if chosen:
        return Path(chosen)
    return (root or Path.cwd()) / DIRECTORY_NAME


def code_fingerprint(package: Path = PACKAGE) -> str:
    """Sizes and mtimes of the installed migrator's sources and of RESULT_PACKAGES' entry
    points, with the Python version: any edit or reinstall gives another fingerprint."""
    digest = hashlib.sha256(sys.version.encode())
    for directory, subdirectories, files in os.walk(package):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        relative = os.path.relpath(directory, package)  # once per directory, not per file
        for name in sorted(files):
            if name.endswith(".py"):
                label = name if relative == "." else os.path.join(relative, name)
                _stat_into(digest, label, os.path.join(directory, name))
    from importlib.util import find_spec

    for name in RESULT_PACKAGES:
        spec = find_spec(name)  # locates without importing
        origin = spec.origin if spec is not None else None
        _stat_into(digest, name, origin)
    return digest.hexdigest()


def _stat_into(digest, label: str, path: str | None) -> None:
    try:
        info = os.stat(path) if path else None
    except OSError:
        info = None
    stamp = f"{info.st_size}:{info.st_mtime_ns}" if info is not None else "absent"
    digest.update(f"\0{label}\0{stamp}".encode())


def options_fingerprint(options) -> str:
    """Every field of the engine's Options, whatever fields it grows."""
    values = {}
    for field in fields(options):
        value = getattr(options, field.name)
        if isinstance(value, (set, frozenset)):
            value = sorted(value)
        values[field.name] = value
    return json.dumps(values, sort_keys=True, default=repr)


def environment_digest(options) -> str:
    parts = (str(FORMAT), __version__, code_fingerprint(), options_fingerprint(options))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def entry_key(kind: str, data: bytes, dependencies: Iterable[tuple[str, bytes]] = ()) -> str:
    """The entry of one file: its kind, its bytes and (later) the files its result depends on.
    With no dependencies the key is the same as before dependencies existed."""
    digest = hashlib.sha256(kind.encode() + b"\0" + hashlib.sha256(data).digest())
    for path, content_digest in sorted(dependencies):
        digest.update(b"\0dep\0" + path.encode() + b"\0" + content_digest)
    return digest.hexdigest()


@dataclass(frozen=True)
class VerdictCache:
    """One environment's entries (picklable: the workers of a run write their own)."""

    directory: Path  # <cache dir>/<version>/<environment>
    environment: str
    writable: bool = True

    def load(self, key: str, path: str, data: bytes, kind: str) -> FileResult | None:
        """The cached result of `data` at `path`, or None (miss, corrupt or foreign entry)."""
        try:
            with open(self.directory / key, "rb") as handle:
                stored = handle.read()
            return self._decode(stored, key, path, data, kind)
        except Exception:  # noqa: BLE001 - a bad entry is a miss, never an error
            return None

    def store(self, key: str, result: FileResult) -> None:
        if not self.writable or not cacheable(result):
            return
        header = {
            "key": f"{self.environment}/{key}",
            "changed": result.changed,
            "skipped": result.skipped,
            "error": result.error,
            "note": getattr(result, "note", None),
            "findings": [_stored(finding) for finding in result.findings],
            "depends": [[dep, _digest_of(dep)] for dep in getattr(result, "depends_on", [])],
        }
        content = json.dumps(header).encode() + b"\n" + (result.migrated if result.changed else b"")
        checksum = hashlib.sha256(content).hexdigest().encode()
        entry = MAGIC + checksum + b"\n" + content
        try:
            replace_atomically(self.directory / key, entry, 0o644, durable=False)
        except WriteError:
            pass  # a full disk, a directory removed meanwhile: the next run recomputes

    def load_prefiltered(self) -> dict[str, tuple[int, int]]:
        """The `prefiltered` index: absolute path -> (size, mtime_ns); empty when unreadable."""
        try:
            stored = (self.directory / PREFILTERED).read_bytes()
            checksum, _, content = stored.partition(b"\n")
            if hashlib.sha256(content).hexdigest().encode() != checksum:
                return {}
            return {path: (size, mtime) for path, (size, mtime) in json.loads(content).items()}
        except Exception:  # noqa: BLE001 - a bad index is an empty one, never an error
            return {}

    def store_prefiltered(self, index: dict[str, tuple[int, int]]) -> None:
        """Replace the index (atomically; a failure leaves the old one or none)."""
        if not self.writable:
            return
        content = json.dumps(index, separators=(",", ":")).encode()
        checksum = hashlib.sha256(content).hexdigest().encode()
        try:
            replace_atomically(
                self.directory / PREFILTERED, checksum + b"\n" + content, 0o644, durable=False
            )
        except WriteError:
            pass

    def _decode(self, stored: bytes, key: str, path: str, data: bytes, kind: str):
        if not stored.startswith(MAGIC):
            return None
        checksum, _, content = stored[len(MAGIC) :].partition(b"\n")
        if hashlib.sha256(content).hexdigest().encode() != checksum:
            return None  # truncated or damaged
        encoded_header, _, body = content.partition(b"\n")
        header = json.loads(encoded_header)
        if header["key"] != f"{self.environment}/{key}":
            return None  # another environment's or another file's entry
        if any(_digest_of(dep) != digest for dep, digest in header.get("depends", [])):
            return None  # a helper module it read has changed since (or is gone)
        result = _new_result(kind, path, data)
        result.migrated = body if header["changed"] else None
        result.skipped = bool(header["skipped"])
        result.error = header["error"]
        result.findings = [_finding(entry) for entry in header["findings"]]
        if header["note"] is not None:
            result.note = header["note"]  # a NotebookResult: why it was skipped
        return result


def _digest_of(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def cacheable(result: FileResult) -> bool:
    """Verdicts that depend only on the key: not an internal error (a crashed rule, a worker
    that died, memory) and not a file that could not be read."""
    error = result.error
    return error is None or not error.startswith(("internal error", "cannot read"))


def open_cache(directory: Path, options, warn=None) -> VerdictCache:
    """The environment of `options` in `directory`, created with its .gitignore and
    CACHEDIR.TAG; read-only (warned once) when it cannot be created."""
    environment = environment_digest(options)
    folder = directory / __version__ / environment[:24]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _create_once(directory / ".gitignore", GITIGNORE)
        _create_once(directory / "CACHEDIR.TAG", CACHEDIR_TAG)
        folder.mkdir(parents=True, exist_ok=True)
        os.utime(folder)  # last used: what pruning reads
        descriptor, probe = new_temp_file(folder, ".probe.")  # the directory takes new files
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        if warn is not None:
            warn(
                f"migrate: warning: cache directory {directory} is not writable "
                f"({error.strerror or error}); results are not cached"
            )
        return VerdictCache(folder, environment, writable=False)
    return VerdictCache(folder, environment)


def prune(cache: VerdictCache, now: float | None = None) -> None:
    """Remove environments (of any version) not used for UNUSED_SECONDS; never fails."""
    if not cache.writable:
        return
    now = time.time() if now is None else now
    root = cache.directory.parent.parent
    try:
        for version in os.scandir(root):
            if not version.is_dir(follow_symlinks=False):
                continue
            for environment in os.scandir(version.path):
                if not environment.is_dir(follow_symlinks=False):
                    continue
                if environment.path == str(cache.directory):
                    continue
                if now - environment.stat(follow_symlinks=False).st_mtime > UNUSED_SECONDS:
                    import shutil  # rarely needed: not a cost of every run

                    shutil.rmtree(environment.path, ignore_errors=True)
            try:
                os.rmdir(version.path)  # only when no environment is left in it
            except OSError:
                pass
    except OSError:
        pass


def _new_result(kind: str, path: str, data: bytes) -> FileResult:
    if kind == "notebook":
        from migrator.notebook import NotebookResult

        return NotebookResult(path=path, source=data)
    return FileResult(path=path, source=data)


def _stored(finding: Finding) -> dict:
    """A finding as an entry keeps it: its JSON, and what the run reads of it afterwards."""
    entry = finding.to_json()
    if finding.by_hand:
        entry["by_hand"] = True
    if finding.prepares_for:
        entry["prepares_for"] = finding.prepares_for
    return entry


def _finding(entry: dict) -> Finding:
    if "cell" in entry:
        from migrator.notebook import NotebookFinding

        return NotebookFinding(**entry)
    return Finding(**entry)


def _create_once(path: Path, content: bytes) -> None:
    try:
        with open(path, "xb") as handle:
            handle.write(content)
    except FileExistsError:
        pass
