"""Leaving cleanly: the exit barrier, gloo's worker threads, and naming the rank that failed.

gloo aborted about 1 run in 4 at exit when ranks tore the group down apart, so the group is
destroyed after a barrier at exit (`atexit`) and in `end_training`; a failing rank skips the
barrier (its peers are elsewhere), writes torchrun's error file, and peers hit by its death
wait for torchrun's agent to stop them, so the summary names the rank that raised.

On several nodes the agent of a surviving node never saw the failure, so the rank that fails
also records its error in the launcher's store (torchrun's MASTER_ADDR:MASTER_PORT), and a
rank whose collective broke because of a peer asks that store who failed: the ranks that
recorded an error, and those that neither did nor answer within a few seconds (a node that
died). Its own error then names them, so every node's summary points at the real failure.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist

PEER_FAILURE_GRACE_S = 10.0
ANY_RANK = -1  # the key a rank that returned without a process group writes its rank under
ROLL_CALL_S = 5.0  # how long a survivor waits for the others to say they are alive
_SILENT = "stopped answering (its node died, or it was killed)"
_remote_failure = {"seen": False}
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
    local = not _remote_failure["seen"]  # a peer on another node: no local agent will stop us
    if local and is_peer_failure(error) and os.environ.get("TORCHELASTIC_RUN_ID"):
        threading.Event().wait(PEER_FAILURE_GRACE_S)


def _job_store():
    """A client of the launcher's store, or None outside torchrun or when it is gone."""
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not (os.environ.get("TORCHELASTIC_RUN_ID") and host and port):
        return None
    try:
        return dist.TCPStore(
            host, int(port), is_master=False, timeout=timedelta(seconds=2), wait_for_workers=False
        )
    except Exception:  # noqa: BLE001 - unreachable: its node died too
        return None


def _key(kind: str, rank: int) -> str:
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return f"runtime/{run}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{kind}/{rank}"


def publish_failure(error: BaseException) -> None:
    """This rank failed on its own: tell the others, through the launcher's store."""
    store = _job_store()
    if store is None or "RANK" not in os.environ:
        return
    try:
        store.set(_key("failed", int(os.environ["RANK"])), f"{type(error).__name__}: {error}"[:400])
    except Exception:  # noqa: BLE001, S110 - best effort: the local summary names this rank
        pass


def announce_left_without_group() -> None:
    """A launched function returned on this rank and it never created the process group."""
    store = _job_store()
    if store is None or "RANK" not in os.environ or dist.is_initialized():
        return
    try:  # one key for all: a watching rank asks the store once per poll, whatever the size
        store.set(_key("left", ANY_RANK), os.environ["RANK"])
    except Exception:  # noqa: BLE001, S110 - best effort: without it the peer waits as before
        pass


class LeftPeerWatch:
    """While this rank creates the process group, stops it if a peer's function returned
    without joining: creating the group would wait for that peer forever (HF's
    notebook_launcher hangs there too). The agent then restarts the round or reports this."""

    def __init__(self, poll_s: float = 0.2) -> None:
        self.poll_s = poll_s
        self.done = threading.Event()

    def __enter__(self) -> None:
        store = _job_store()
        if store is not None and "RANK" in os.environ:
            threading.Thread(target=self._watch, args=(store,), daemon=True).start()

    def __exit__(self, *exc) -> None:
        self.done.set()

    def _watch(self, store) -> None:
        rank = os.environ["RANK"]
        key = _key("left", ANY_RANK)
        while not self.done.wait(self.poll_s):
            try:
                left = store.get(key).decode() if store.check([key]) else None
            except Exception:  # noqa: BLE001 - the store is gone: the agent is stopping us
                return
            if left is not None and not self.done.is_set():
                print(
                    f"[runtime] rank {rank}: rank {left} finished without creating the "
                    "process group, so creating it here would wait forever; stopping",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(1)


def failed_peers(wait_s: float = ROLL_CALL_S) -> dict[int, str]:
    """The other ranks that failed (their recorded errors) or stopped answering."""
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    others = [other for other in range(world) if other != rank]
    store = _job_store()
    if store is None:
        # the store's node is gone too; with one peer it can only be that one
        return {others[0]: _SILENT} if world == 2 else {}
    failed: dict[int, str] = {}
    silent = list(others)
    try:
        store.set(_key("alive", rank), "1")
        deadline = time.monotonic() + wait_s
        while silent and time.monotonic() < deadline:
            for other in list(silent):
                if store.check([_key("failed", other)]):
                    failed[other] = store.get(_key("failed", other)).decode()
                    silent.remove(other)
                elif store.check([_key("alive", other)]):
                    silent.remove(other)
            time.sleep(0.1)
    except Exception:  # noqa: BLE001, S110 - the store went away while asking
        pass
    return {**failed, **dict.fromkeys(silent, _SILENT)}


def _on_other_nodes(ranks) -> bool:
    """Whether all `ranks` run on other nodes (torchrun's GROUP_RANK, LOCAL_WORLD_SIZE)."""
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "0"))
    if not per_node or "GROUP_RANK" not in os.environ:
        return False
    return all(rank // per_node != int(os.environ["GROUP_RANK"]) for rank in ranks)


def describe_failure(error: BaseException) -> BaseException:
    """The error to report for this rank: its own (published for the others), or, when a
    collective broke because of a peer, one naming the rank(s) that really failed."""
    if not is_peer_failure(error):
        publish_failure(error)
        return error
    failed = failed_peers() if int(os.environ.get("WORLD_SIZE", "1")) > 1 else {}
    if not failed:
        return error
    _remote_failure["seen"] = _on_other_nodes(failed)
    named = "; ".join(
        f"rank {other} {'failed: ' if message != _SILENT else ''}{message}"
        for other, message in sorted(failed.items())
    )
    rank = os.environ.get("RANK", "?")
    print(f"[runtime] rank {rank} lost its peers: {named}", file=sys.stderr, flush=True)
    described = RuntimeError(f"{named} (rank {rank} lost its connection: {error})")
    described.__cause__ = error
    return described


def _record_failure(exc_type, exc, traceback) -> None:
    # A failing rank must not wait in the exit barrier: its peers are elsewhere.
    _exit_is_failure["failed"] = True
    reported = describe_failure(exc) if isinstance(exc, Exception) else exc
    _previous_excepthook(exc_type, exc, traceback)
    sys.stderr.flush()
    let_launcher_stop_this_rank(exc)
    exc = reported
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
