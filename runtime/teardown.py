"""Leaving cleanly: the exit barrier, gloo's worker threads, and naming the rank that failed.

gloo aborted about 1 run in 4 at exit when ranks tore the group down apart, so the group is
destroyed after a barrier at exit (`atexit`) and in `end_training`; a failing rank skips the
barrier (its peers are elsewhere), writes torchrun's error file, and peers hit by its death
wait for torchrun's agent to stop them, so the summary names the rank that raised.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

import torch.distributed as dist

PEER_FAILURE_GRACE_S = 10.0
_PEER_FAILURE_SIGNS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote worker",
    "Broken pipe",
    "communicator was aborted",
)
_exit_is_failure = {"failed": False}


def exit_is_failure() -> bool:
    return _exit_is_failure["failed"]


def mark_failed() -> None:
    """Called by launchers when the function they run raised."""
    _exit_is_failure["failed"] = True


def forget_failure() -> None:
    _exit_is_failure["failed"] = False


def _gloo_worker_states() -> list[str]:
    """Scheduler states (R, S, ...) of gloo's worker threads in this process (Linux only)."""
    states = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as handle:
                stat = handle.read()
        except OSError:  # the thread just ended
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name.startswith(("pt_gloo", "gloo")):
            states.append(stat[stat.rindex(")") + 2])
    return states


def let_gloo_workers_settle(limit_s: float = 1.0) -> None:
    """Waits (bounded) until gloo's worker threads are idle, with the GIL released.

    DDP keeps a reference to the gloo group after `destroy_process_group`, so its worker
    threads outlive it; one still releasing the tensors of a finished collective needs the
    GIL, and if that happens during interpreter finalisation the process aborts
    ("terminate called without an active exception"). Sleeping releases the GIL to them.
    """
    if not os.path.isdir("/proc/self/task"):
        return
    deadline = time.monotonic() + limit_s
    quiet = 0
    while quiet < 3 and time.monotonic() < deadline:
        time.sleep(0.002)
        quiet = quiet + 1 if all(state == "S" for state in _gloo_worker_states()) else 0


def is_peer_failure(error: BaseException) -> bool:
    """A collective that failed because another rank died (not this rank's own bug)."""
    if isinstance(error, getattr(dist, "DistNetworkError", ())):
        return True
    return isinstance(error, RuntimeError) and any(s in str(error) for s in _PEER_FAILURE_SIGNS)


def let_launcher_stop_this_rank(error: BaseException) -> None:
    """On a peer's death, give torchrun's agent (which saw it die) time to stop this rank.

    Exiting at once would race the real failure, and torchrun names the earliest failure
    (timestamps in whole seconds) the root cause; bounded, so nothing can hang on it.
    """
    if is_peer_failure(error) and os.environ.get("TORCHELASTIC_RUN_ID"):
        threading.Event().wait(PEER_FAILURE_GRACE_S)


def _record_failure(exc_type, exc, traceback) -> None:
    # A failing rank must not wait in the exit barrier: its peers are elsewhere.
    _exit_is_failure["failed"] = True
    _previous_excepthook(exc_type, exc, traceback)
    sys.stderr.flush()
    let_launcher_stop_this_rank(exc)
    if os.environ.get("TORCHELASTIC_ERROR_FILE") and isinstance(exc, Exception):
        # the file torchrun reads to name the root-cause rank and print its traceback
        from torch.distributed.elastic.multiprocessing.errors import get_error_handler

        handler = get_error_handler()
        try:
            raise exc  # record_exception reads the traceback of the exception being handled
        except Exception as handled:  # noqa: BLE001 - re-raised only to be recorded
            handler.record_exception(handled)


_previous_excepthook = sys.excepthook
_hooks_installed = {"done": False}


def install_exit_hooks(shut_down_at_exit) -> None:
    """Once per process: the failure-recording excepthook and the exit teardown."""
    global _previous_excepthook
    if _hooks_installed["done"]:
        return
    _hooks_installed["done"] = True
    _previous_excepthook = sys.excepthook
    sys.excepthook = _record_failure
    atexit.register(shut_down_at_exit)
