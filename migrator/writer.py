"""Atomic writes: a temp file in the same directory, then os.replace; mode bits kept."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class WriteError(Exception):
    pass


def write_atomically(path: Path, data: bytes) -> None:
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror or error}") from None
    temp_name = None
    try:
        fd, temp_name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=".migrate-tmp", dir=path.parent
        )
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
        temp_name = None
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror or error}") from None
    finally:
        if temp_name is not None:
            try:
                os.unlink(temp_name)
            except OSError:
                pass
