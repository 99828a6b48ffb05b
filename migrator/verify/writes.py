"""Files and folders each process creates or writes, seen from inside the run (the recorder).

A Python audit hook (`sys.addaudithook`) sees every `open` for writing (builtins, `io`, `os.open`:
numpy, PIL, matplotlib, csv, json, pickle and logging write through these), `os.mkdir` (and
so `os.makedirs`) and `os.rename`/`os.replace`. `torch.save` to a path writes from C++, past
the hook, so it is wrapped; the wrapper also keeps what was saved (`checkpoint_contents`), so
that the parent can compare checkpoints without reading files two runs may share.

Each run works in its own folder mirroring the user's (`sandbox.py`): a file that is a link
to the user's own file is replaced by a real file before it is written (copy on write), so a
run never writes through to the user's files and two runs never write the same one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

WRITING_FLAGS = os.O_WRONLY | os.O_RDWR
TRUNCATING_FLAGS = os.O_TRUNC
SKIPPED_SUFFIXES = (".pyc", ".pyo")
SKIPPED_ROOTS = ("/dev/", "/proc/", "/sys/")


class WriteLog:
    """What this process wrote: {"path", "kind": file|folder, "how", "step"} once per path.

    Paths inside the run's working folder are kept relative to it (the same in every run);
    paths outside it absolute. Verify's own files, interpreter and package folders, hidden
    folders of the home directory (caches) and compiled bytecode are not the script's output.
    """

    def __init__(self, sandbox: Path | None, ignored: list[Path], current_step: Callable) -> None:
        self.sandbox = os.path.abspath(sandbox) + os.sep if sandbox else None
        home = os.path.expanduser("~")
        roots = [str(p) for p in ignored] + [sys.prefix, sys.base_prefix, sys.exec_prefix]
        self.ignored = tuple(os.path.abspath(r) + os.sep for r in roots if r)
        self.hidden_home = os.path.join(home, ".") if home and home != "/" else None
        self.current_step = current_step
        self.entries: dict[tuple[str, str], dict] = {}
        self.busy = False  # the hook's own file operations raise audit events too

    def key(self, path) -> str | None:
        """The path as reported, or None when it is not the script's output."""
        try:
            text = os.fsdecode(os.fspath(path))
        except TypeError:
            return None
        absolute = os.path.abspath(text)
        if self.sandbox and absolute.startswith(self.sandbox):
            inside = absolute[len(self.sandbox) :]
            return None if inside.endswith(SKIPPED_SUFFIXES) or "__pycache__" in inside else inside
        if (
            absolute.startswith(self.ignored + SKIPPED_ROOTS)
            or (self.hidden_home and absolute.startswith(self.hidden_home))
            or absolute.endswith(SKIPPED_SUFFIXES)
            or "__pycache__" in absolute
        ):
            return None
        return absolute

    def note(self, path, kind: str, how: str, *, truncates: bool = True) -> str | None:
        key = self.key(path)
        if key is None:
            return None
        if kind == "file" and self.sandbox:
            self.copy_on_write(os.path.abspath(os.fsdecode(os.fspath(path))), truncates)
        self.entries.setdefault(
            (key, kind), {"path": key, "kind": kind, "how": how, "step": self.current_step()}
        )
        return key

    def copy_on_write(self, absolute: str, truncates: bool) -> None:
        """A link into the user's folder becomes this run's own file before it is written."""
        if not absolute.startswith(self.sandbox) or not os.path.islink(absolute):
            return
        self.busy = True
        try:
            target = os.path.realpath(absolute)
            os.unlink(absolute)
            if not truncates and os.path.isfile(target):
                shutil.copyfile(target, absolute)
        except OSError:
            pass
        finally:
            self.busy = False

    def audit(self, event: str, args: tuple) -> None:
        if self.busy or event not in AUDITED:
            return
        with contextlib.suppress(Exception):  # an audit hook must never break the script
            if event == "open":
                path, _, flags = args
                if path is None or isinstance(path, int) or not flags & WRITING_FLAGS:
                    return
                self.note(path, "file", "open", truncates=bool(flags & TRUNCATING_FLAGS))
            elif event == "os.mkdir":
                self.note(args[0], "folder", "mkdir")
            elif event == "os.rename":
                self.note(args[1], "file", "rename")

    def as_list(self) -> list[dict]:
        return list(self.entries.values())


AUDITED = frozenset({"open", "os.mkdir", "os.rename"})


def install(log: WriteLog, on_torch_save: Callable[[object, str], None]) -> None:
    sys.addaudithook(log.audit)
    import torch
    import torch.serialization

    original = torch.serialization.save

    @functools.wraps(original)
    def recording_save(obj, f, *args, **kwargs):
        key = None
        if isinstance(f, (str, os.PathLike)):
            key = log.note(f, "file", "torch.save")
        elif isinstance(getattr(f, "name", None), str):
            key = log.key(f.name)  # a file object: its open was seen by the audit hook
        result = original(obj, f, *args, **kwargs)
        if key is not None:
            on_torch_save(obj, key)
        return result

    torch.save = recording_save
    torch.serialization.save = recording_save


def flush_open_files() -> None:
    """Flushes what the script wrote but did not close: the recorder leaves with os._exit,
    which skips the interpreter's own flushing at exit."""
    import gc
    import io
    import logging

    with contextlib.suppress(Exception):
        logging.shutdown()
    for obj in gc.get_objects():
        writer = type(obj).__name__ in ("SummaryWriter", "FileWriter")
        # a stream that cannot flush is the script's to report
        with contextlib.suppress(Exception):
            if (isinstance(obj, io.IOBase) and not obj.closed and obj.writable()) or (
                writer and hasattr(obj, "flush")
            ):
                obj.flush()


def ignored_folders(config: dict) -> list[Path]:
    """verify's own folders: its work folder (the sandbox inside it is checked first)."""
    return [Path(config["work_dir"]), Path(os.environ.get("TMPDIR", "/nonexistent-tmp"))]
