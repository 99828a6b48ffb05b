"""Atomic writes: a temp file in the same directory, then os.replace; mode bits kept.

The bytes written are the engine's, which keep the file's encoding, BOM and newline style.
Signals that end the process (Ctrl-C, SIGTERM, SIGHUP) are held back while one file is being
written, so an interrupted run leaves every file old or new and never a temp file behind.
A file whose mode bits (or directory's) forbid writing is refused even when running as root.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMP_SUFFIX = ".migrate-tmp"
# tempfile.mkstemp's flags: a new file (never an existing one, nor through a link), ours alone
_TEMP_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_DEFERRED_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


class WriteError(Exception):
    pass


def write_atomically(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace `path`'s content with `data`. With `expected`, refuse if the file changed since
    it was read (another tool or an editor wrote it meanwhile)."""
    target = Path(os.path.realpath(path))  # a symlink named on the command line stays a link
    try:
        info = os.stat(target)
        if expected is not None and target.read_bytes() != expected:
            raise WriteError("cannot write: the file changed while it was being migrated")
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror or error}") from None
    mode = stat.S_IMODE(info.st_mode)
    _check_writable(target, mode)
    with _signals_deferred():
        replace_atomically(target, data, mode)


def _check_writable(target: Path, mode: int) -> None:
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise WriteError("cannot write: the file is read-only")
    directory = target.parent
    directory_mode = stat.S_IMODE(os.stat(directory).st_mode)
    if not directory_mode & 0o222 or not os.access(directory, os.W_OK | os.X_OK):
        raise WriteError(f"cannot write: directory {directory} is read-only")


def replace_atomically(target: Path, data: bytes, mode: int, durable: bool = True) -> None:
    """A temp file beside `target`, then os.replace: readers see the old or the new content,
    never half of it. `durable`: fsync before the rename (a user's file; not a cache entry)."""
    temp_name = None
    try:
        fd, temp_name = new_temp_file(target.parent, f".{target.name}.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
        temp_name = None
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror or error}") from None
    finally:
        if temp_name is not None:
            try:
                os.unlink(temp_name)
            except OSError:
                pass


def new_temp_file(directory: Path, prefix: str) -> tuple[int, str]:
    """(descriptor, path) of a new file `<prefix><random><TEMP_SUFFIX>` in `directory`, as
    tempfile.mkstemp makes it: importing tempfile (and shutil, bz2, lzma, random with it) would
    cost a one-file run (pre-commit's) more than the whole write."""
    for _ in range(100):
        path = os.path.join(directory, f"{prefix}{os.urandom(5).hex()}{TEMP_SUFFIX}")
        try:
            return os.open(path, _TEMP_FLAGS, 0o600), path
        except FileExistsError:
            continue  # a name taken: draw another
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(directory))


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Block the terminating signals for the duration; they are delivered on exit."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
