"""Whether a process is still getting anywhere, and where it stands (the recorder's side).

* a heartbeat: a counter in a small memory-mapped file, bumped at every batch fetched,
  backward, optimizer step, collective and printed line; the parent reads it to tell a hung
  run (no beat for a while) from a slow one, without waiting for `--timeout`;
* the longest quiet spell between beats, so that the parent sizes "a while" on the original;
* a step log, one line per optimizer step, flushed: a run stopped while hung still shows how
  far it got;
* a stack dump on SIGUSR2 (`faulthandler`, which works while the process waits in C code):
  the parent asks every rank of a hung run where it waits;
* a rendezvous at the end by files, not collectives: a rank that finished the script waits
  there for the others (a real run waits in the exit barrier), so a rank stuck in a
  collective stays stuck and shows where, instead of failing when its peer exits.
"""

from __future__ import annotations

import faulthandler
import functools
import mmap
import os
import signal
import struct
import time
from pathlib import Path

from migrator.verify.records import beat_file, done_file, stack_file, steps_file

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "monitored_barrier",
)
DUMP_SIGNAL = signal.SIGUSR2
END_POLL_S = 0.02


class Heartbeat:
    def __init__(self, out_dir: Path, rank: int) -> None:
        path = beat_file(out_dir, rank)
        path.write_bytes(b"\0" * 8)
        self._file = open(path, "r+b")  # noqa: SIM115 - kept open for the mapping's life
        self._map = mmap.mmap(self._file.fileno(), 8)
        self.count = 0
        self.started = time.monotonic()
        self.last: float | None = None
        self.first_beat_s: float | None = None
        self.max_quiet_s = 0.0

    def beat(self) -> None:
        self.count += 1
        struct.pack_into("<Q", self._map, 0, self.count)
        now = time.monotonic()
        if self.last is None:
            self.first_beat_s = now - self.started
        else:
            self.max_quiet_s = max(self.max_quiet_s, now - self.last)
        self.last = now


class StepLog:
    def __init__(self, out_dir: Path, rank: int) -> None:
        self._file = open(steps_file(out_dir, rank), "w", encoding="utf-8")  # noqa: SIM115

    def note(self, loss: float, lr: float | None) -> None:
        self._file.write(f"{loss!r} {lr!r}\n")
        self._file.flush()


def watch_collectives(beat) -> None:
    """Every torch.distributed collective beats when it starts and when it returns."""
    import torch.distributed as dist

    for name in COLLECTIVES:
        original = getattr(dist, name, None)
        if original is None or getattr(original, "_verify_wrapped", False):
            continue

        def make(original):
            @functools.wraps(original)
            def collective(*args, **kwargs):
                beat()
                try:
                    return original(*args, **kwargs)
                finally:
                    beat()

            collective._verify_wrapped = True
            return collective

        setattr(dist, name, make(original))


def dump_stack_on_request(out_dir: Path, rank: int):
    """Registers the stack dump; returns the open file (it must stay open)."""
    handle = open(stack_file(out_dir, rank), "w")  # noqa: SIM115
    faulthandler.register(DUMP_SIGNAL, file=handle, all_threads=True, chain=False)
    return handle


def wait_for_other_ranks(out_dir: Path, rank: int, world_size: int) -> None:
    """The end of the script on this rank: waits until every rank got there."""
    done_file(out_dir, rank).write_text("")
    while not all(done_file(out_dir, other).exists() for other in range(world_size)):
        time.sleep(END_POLL_S)


def world_size() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1
