"""Process facts from the torchrun environment: process group, device, ranks, teardown.

One `ProcessState` per process (several `Accelerator` objects share it). A run with no
launcher (no WORLD_SIZE, or WORLD_SIZE=1) is a 1-process run and creates no process group.
Under torchrun with WORLD_SIZE > 1 the group is initialised from the environment (env://):
nccl when this process uses CUDA, gloo otherwise. CPU multi-process needs no flag.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f", ""}


def env_flag(name: str, default: bool | None = None) -> bool | None:
    """Reads a boolean environment variable (1/true/yes, 0/false/no); `default` when unset."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"environment variable {name}={raw!r} is not a boolean (use 1 or 0)")


class ProcessState:
    """Rank facts and the process group of this process."""

    def __init__(self, cpu: bool = False) -> None:
        self.use_cpu = cpu
        self.owns_process_group = False
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if dist.is_available() and not dist.is_initialized() and world_size > 1:
            backend = "gloo" if cpu or not torch.cuda.is_available() else "nccl"
            if backend == "nccl":
                # pin the device before the group exists so nccl never guesses device 0
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            dist.init_process_group(backend=backend)
            self.owns_process_group = True
        self.distributed = dist.is_available() and dist.is_initialized()
        if self.distributed:
            self.process_index = dist.get_rank()
            self.num_processes = dist.get_world_size()
            self.backend = dist.get_backend()
        else:
            self.process_index, self.num_processes, self.backend = 0, 1, None
        self.local_process_index = int(os.environ.get("LOCAL_RANK", self.process_index))
        self.device = self._pick_device()

    def _pick_device(self) -> torch.device:
        if self.use_cpu or not torch.cuda.is_available():
            return torch.device("cpu")
        index = self.local_process_index % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)

    @property
    def is_main_process(self) -> bool:
        return self.process_index == 0

    @property
    def is_local_main_process(self) -> bool:
        return self.local_process_index == 0

    def wait_for_everyone(self) -> None:
        if self.distributed:
            if self.backend == "nccl":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()

    def shut_down(self) -> None:
        """Barrier, then destroy the group: gloo aborts at exit when ranks tear down apart."""
        if not (dist.is_available() and dist.is_initialized()):
            return
        # Free unreachable DDP models (reference cycles) now, while the group and the
        # interpreter are alive: freed during finalisation, gloo aborts the process.
        gc.collect()
        if not _exit_is_failure["failed"]:
            self.wait_for_everyone()
        dist.destroy_process_group()
        self.distributed = False
        _let_gloo_workers_settle()


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


def _let_gloo_workers_settle(limit_s: float = 1.0) -> None:
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


_process_state: ProcessState | None = None
_exit_is_failure = {"failed": False}


def get_process_state(cpu: bool = False) -> ProcessState:
    """The process-wide state, created on first use."""
    global _process_state
    if _process_state is None or (_process_state.distributed and not dist.is_initialized()):
        _process_state = ProcessState(cpu=cpu)
        _install_exit_hooks()
    elif cpu and _process_state.device.type != "cpu":
        raise ValueError(
            "an Accelerator already runs on "
            f"{_process_state.device}; a second one cannot ask for cpu=True in the same process"
        )
    return _process_state


def _shut_down_at_exit() -> None:
    if _process_state is not None and _process_state.owns_process_group:
        _process_state.shut_down()


_PEER_FAILURE_SIGNS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote worker",
    "Broken pipe",
    "communicator was aborted",
)


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


PEER_FAILURE_GRACE_S = 10.0


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


def _install_exit_hooks() -> None:
    global _previous_excepthook
    if _hooks_installed["done"]:
        return
    _hooks_installed["done"] = True
    _previous_excepthook = sys.excepthook
    sys.excepthook = _record_failure
    atexit.register(_shut_down_at_exit)


def mark_failed() -> None:
    """Called by launchers when the function they run raised."""
    _exit_is_failure["failed"] = True


def forget_inherited_state() -> None:
    """A forked worker must build its own state, not reuse its parent's 1-process one."""
    global _process_state
    _process_state = None
    _exit_is_failure["failed"] = False


def shut_down_process_group() -> None:
    """Barrier + destroy for the group this runtime created (used by `end_training`)."""
    if _process_state is not None:
        _process_state.shut_down()


class GradientState:
    """Accumulation bookkeeping and the loader being iterated (for `gather_for_metrics`)."""

    def __init__(self, num_steps: int = 1) -> None:
        self.num_steps = num_steps
        self.step = 0
        self.sync_gradients = True
        self.active_loaders: list = []

    @property
    def end_of_dataloader(self) -> bool:
        return bool(self.active_loaders) and self.active_loaders[-1].end_of_dataloader

    @property
    def remainder(self) -> int:
        return self.active_loaders[-1].remainder if self.active_loaders else -1

    def do_sync(self) -> None:
        """Advances one micro-step; the last batch of a loader always syncs (then restarts)."""
        if self.end_of_dataloader:
            self.step = 0
            self.sync_gradients = True
        else:
            self.step += 1
            self.sync_gradients = self.step % self.num_steps == 0
