"""What each process shows the user, recorded inside the run (the recorder's side).

Three streams, each a JSON-lines file per rank in the run's folder, every line stamped with
the optimizer step count at the moment it was shown (`records.CAPTURES`):

* `stdout`: what the process prints (sys.stdout is teed; the real output is unchanged);
* `log`: the `logging` records some handler actually emits (a record no handler shows is
  not output);
* `print`: what `accelerator.print` would print, on *every* rank (HF Accelerate's and our
  runtime's `PartialState.print` are wrapped when their module is imported): the main
  process prints its own value, the others' tell whether the mean over processes agrees
  with the original (a per-process value such as a local loss) or not (a wrong reduction).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import io
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from migrator.verify.records import capture_file

MAX_LINES = 20000  # per stream and rank: a chatty script's output is compared on its start
PRINTING_MODULES = ("runtime.state", "accelerate.state")


class LineStream:
    """One capture file: each complete line as {"step": s, "text": line}."""

    def __init__(self, path: Path, current_step: Callable[[], int]) -> None:
        # line buffered: nothing is left in a buffer that a forked worker could write again
        self.file = open(path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.current_step = current_step
        self.lines = 0

    def write_line(self, text: str) -> None:
        if self.lines >= MAX_LINES:
            return
        self.lines += 1
        self.file.write(json.dumps({"step": self.current_step(), "text": text}) + "\n")

    def close(self) -> None:
        if not self.file.closed:
            self.file.close()


class TeeStdout:
    """sys.stdout as the script sees it: writes go through, complete lines are recorded.
    A carriage return ends a line too (progress lines redrawn in place)."""

    def __init__(self, stream, lines: LineStream) -> None:
        self._stream = stream
        self._lines = lines
        self._pending = ""
        self.on_line = None  # the heartbeat: a process printing is getting somewhere

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        if not isinstance(text, str):
            return written
        self._pending += text.replace("\r\n", "\n").replace("\r", "\n")
        *complete, self._pending = self._pending.split("\n")
        for line in complete:
            self._lines.write_line(line)
            if self.on_line is not None:
                self.on_line()
        return written

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def finish(self) -> None:
        if self._pending:
            self._lines.write_line(self._pending)
            self._pending = ""

    def __getattr__(self, name):
        return getattr(self._stream, name)


class Captures:
    def __init__(self, out_dir: Path, rank: int, current_step: Callable[[], int]) -> None:
        self.streams = {
            name: LineStream(capture_file(out_dir, name, rank), current_step)
            for name in ("stdout", "log", "print")
        }
        self.tee: TeeStdout | None = None

    def install(self) -> None:
        self.tee = TeeStdout(sys.stdout, self.streams["stdout"])
        sys.stdout = self.tee
        _watch_logging(self.streams["log"])
        after_import(PRINTING_MODULES, lambda module: _watch_print(module, self.streams["print"]))

    def close(self) -> None:
        if self.tee is not None:
            self.tee.finish()
        for stream in self.streams.values():
            stream.close()


def _shown(logger: logging.Logger, record: logging.LogRecord) -> bool:
    """Whether a handler on the logger's chain (or logging's last resort) emits the record."""
    current, found = logger, False
    while current is not None:
        for handler in current.handlers:
            found = True
            if record.levelno >= handler.level:
                return True
        current = current.parent if current.propagate else None
    last_resort = logging.lastResort
    return not found and last_resort is not None and record.levelno >= last_resort.level


def _watch_logging(lines: LineStream) -> None:
    call_handlers = logging.Logger.callHandlers

    @functools.wraps(call_handlers)
    def recording_call_handlers(self, record):
        # a record that cannot format is logging's to report, not the recorder's
        with contextlib.suppress(Exception):
            if _shown(self, record):
                lines.write_line(f"{record.levelname}:{record.name}:{record.getMessage()}")
        return call_handlers(self, record)

    logging.Logger.callHandlers = recording_call_handlers


def _watch_print(module, lines: LineStream) -> None:
    state = getattr(module, "PartialState", None)
    if state is None or getattr(state.print, "_verify_wrapped", False):
        return
    original = state.print

    @functools.wraps(original)
    def recording_print(self, *args, **kwargs):
        text = io.StringIO()
        print(*args, **{k: v for k, v in kwargs.items() if k in ("sep", "end")}, file=text)
        for line in text.getvalue().replace("\r", "\n").split("\n")[:-1] or [""]:
            lines.write_line(line)
        return original(self, *args, **kwargs)

    recording_print._verify_wrapped = True
    state.print = recording_print


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls back once a watched module has been executed (a patch applied on import)."""

    def __init__(self, names: tuple[str, ...], callback) -> None:
        self.names = set(names)
        self.callback = callback

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _CallingBackLoader(spec.loader, self.callback)
                return spec
        return None


class _CallingBackLoader(importlib.abc.Loader):
    def __init__(self, loader, callback) -> None:
        self.loader = loader
        self.callback = callback

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.callback(module)

    def __getattr__(self, name):  # get_data, is_package, resource readers: the real loader's
        return getattr(self.loader, name)


def after_import(names: tuple[str, ...], callback) -> None:
    for name in names:
        if name in sys.modules:
            callback(sys.modules[name])
    sys.meta_path.insert(0, _AfterImport(names, callback))
