"""Process-wide state, shared by every `Accelerator` of a process (as HF Accelerate shares it).

- `PartialState`: the process group, device and ranks. Created by the first `Accelerator()` or
  `PartialState()`; every later call returns the same object. A run with no launcher (no
  WORLD_SIZE, or WORLD_SIZE=1) is a 1-process run and creates no process group; under torchrun
  with WORLD_SIZE > 1 the group is initialised from the environment (env://) with the
  backend of the process's device (runtime/devices.py: nccl for CUDA, gloo on CPU; CPU
  multi-process needs no flag, unlike HF).
- `AcceleratorState`: what the first `Accelerator` fixed for the process: mixed precision (a
  second Accelerator asking for another one raises, as in HF) and the fp16 GradScaler (one for
  the process, so a backward through one Accelerator and a step through another agree).
- `GradientState` (runtime/gradient_state.py, re-exported here): accumulation settings and
  the loader being iterated.
"""

from __future__ import annotations

import functools
import gc
import os
from contextlib import contextmanager
from typing import Any

import torch.distributed as dist

from runtime import devices, teardown
from runtime.config import DistributedType
from runtime.gradient_state import GradientState
from runtime.splitting import split_share

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


def _do_nothing(*args, **kwargs) -> None:
    return None


class PartialState:
    """Rank facts and the process group of this process; `PartialState()` is the shared one."""

    def __new__(cls, cpu: bool = False, **kwargs):
        return get_process_state(cpu=cpu, init_kwargs=kwargs)

    def __init__(self, cpu: bool = False, **kwargs) -> None:
        pass  # built once, by get_process_state

    def _setup(self, cpu: bool, init_kwargs: dict) -> None:
        self.use_cpu = cpu
        self.owns_process_group = False
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if dist.is_available() and not dist.is_initialized() and world_size > 1:
            local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
            device = devices.process_device(cpu, local_rank, world_size)
            init_kwargs = dict(init_kwargs)
            backend = init_kwargs.pop("backend", None) or devices.default_backend(device)
            if device.type != "cpu":
                # pin the device before the group exists so nccl never guesses device 0
                devices.use_device(device)
            with teardown.LeftPeerWatch():
                dist.init_process_group(backend=backend, **init_kwargs)
            self.owns_process_group = True
        self.distributed = dist.is_available() and dist.is_initialized()
        if self.distributed:
            self.process_index = dist.get_rank()
            self.num_processes = dist.get_world_size()
            self.backend = dist.get_backend()
        else:
            self.process_index, self.num_processes, self.backend = 0, 1, None
        self.local_process_index = int(os.environ.get("LOCAL_RANK", self.process_index))
        self.device = devices.process_device(cpu, self.local_process_index, self.num_processes)
        if self.device.index is not None:
            devices.use_device(self.device)
        # collectives check shapes across processes first (HF's ACCELERATE_DEBUG_MODE)
        self.debug = bool(env_flag("ACCELERATE_DEBUG_MODE", False))

    # ---- facts -------------------------------------------------------------------------
    @property
    def distributed_type(self) -> DistributedType:
        if not self.distributed or self.num_processes == 1:
            return DistributedType.NO
        return devices.distributed_type(self.device)

    @property
    def initialized(self) -> bool:
        return True

    @property
    def use_distributed(self) -> bool:
        return self.distributed and self.num_processes > 1

    @property
    def is_main_process(self) -> bool:
        return self.process_index == 0

    @property
    def is_local_main_process(self) -> bool:
        return self.local_process_index == 0

    @property
    def is_last_process(self) -> bool:
        return self.process_index == self.num_processes - 1

    @property
    def fork_launched(self) -> bool:
        return bool(env_flag("FORK_LAUNCHED", False))

    def __repr__(self) -> str:
        backend = f"  Backend: {self.backend}" if self.backend else ""
        return (
            f"Distributed environment: {self.distributed_type}{backend}\n"
            f"Num processes: {self.num_processes}\n"
            f"Process index: {self.process_index}\n"
            f"Local process index: {self.local_process_index}\n"
            f"Device: {self.device}\n"
        )

    # ---- synchronisation ---------------------------------------------------------------
    def wait_for_everyone(self) -> None:
        if self.distributed:
            if self.backend == "nccl":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()

    @contextmanager
    def _goes_first(self, first: bool):
        if not first:
            self.wait_for_everyone()
        yield
        if first:
            self.wait_for_everyone()

    def main_process_first(self):
        return self._goes_first(self.is_main_process)

    def local_main_process_first(self):
        return self._goes_first(self.is_local_main_process)

    def print(self, *args, **kwargs) -> None:
        if self.is_local_main_process:
            print(*args, **kwargs)

    # ---- work sharing ------------------------------------------------------------------
    @contextmanager
    def split_between_processes(self, inputs: Any, apply_padding: bool = False):
        """This process's contiguous share of a list, tuple, tensor, dict of those, or dataset.

        Shares differ by at most one item (the first processes take the extra ones);
        `apply_padding` appends the input's last item until every process has as many (so
        `gather` works; drop the padding afterwards), as HF does.
        """
        if self.num_processes == 1:
            yield inputs
            return
        yield split_share(inputs, self.num_processes, self.process_index, apply_padding)

    # ---- decorators --------------------------------------------------------------------
    def _only_if(self, runs_here: bool, function):
        return function if runs_here or not self.use_distributed else _do_nothing

    def on_main_process(self, function=None):
        return self._only_if(self.is_main_process, function)

    def on_local_main_process(self, function=None):
        return self._only_if(self.is_local_main_process, function)

    def on_last_process(self, function):
        return self._only_if(self.is_last_process, function)

    def on_process(self, function=None, process_index: int | None = None):
        if function is None:
            return functools.partial(self.on_process, process_index=process_index)
        return self._only_if(self.process_index == process_index, function)

    def on_local_process(self, function=None, local_process_index: int | None = None):
        if function is None:
            return functools.partial(self.on_local_process, local_process_index=local_process_index)
        return self._only_if(self.local_process_index == local_process_index, function)

    # ---- teardown ----------------------------------------------------------------------
    def shut_down(self) -> None:
        """Barrier, then destroy the group: gloo aborts at exit when ranks tear down apart."""
        if not (dist.is_available() and dist.is_initialized()):
            return
        # Free unreachable DDP models (reference cycles) now, while the group and the
        # interpreter are alive: freed during finalisation, gloo aborts the process.
        gc.collect()
        if not teardown.exit_is_failure():
            self.wait_for_everyone()
        dist.destroy_process_group()
        self.distributed = False
        teardown.let_gloo_workers_settle()

    def destroy_process_group(self, group=None) -> None:
        if group is None:
            self.shut_down()
        elif dist.is_initialized():
            dist.destroy_process_group(group)

    @staticmethod
    def _reset_state() -> None:
        """Forgets the process facts (not the process group itself); for tests, as in HF."""
        global _process_state
        _process_state = None


_process_state: PartialState | None = None


def get_process_state(cpu: bool = False, init_kwargs: dict | None = None) -> PartialState:
    """The process-wide state, created on first use."""
    global _process_state
    if _process_state is None or (_process_state.distributed and not dist.is_initialized()):
        state = object.__new__(PartialState)
        state._setup(cpu, init_kwargs or {})
        _process_state = state
        teardown.install_exit_hooks(_shut_down_at_exit)
    elif cpu and _process_state.device.type != "cpu":
        raise ValueError(
            "an Accelerator already runs on "
            f"{_process_state.device}; a second one cannot ask for cpu=True in the same process"
        )
    return _process_state


def debug_mode() -> bool:
    """Whether collectives check shapes first (`PartialState().debug`, ACCELERATE_DEBUG_MODE)."""
    return _process_state is not None and bool(getattr(_process_state, "debug", False))


def _shut_down_at_exit() -> None:
    if _process_state is not None and _process_state.owns_process_group:
        _process_state.shut_down()


def shut_down_process_group() -> None:
    """Barrier + destroy for the group this runtime created (used by `end_training`)."""
    if _process_state is not None:
        _process_state.shut_down()


def forget_inherited_state() -> None:
    """A forked worker must build its own state, not reuse its parent's 1-process one."""
    global _process_state, _accelerator_state
    _process_state = _accelerator_state = None
    GradientState._reset_state()
    teardown.forget_failure()


def is_initialized() -> bool:
    """Whether an `Accelerator` exists in this process (HF's `accelerate.state.is_initialized`)."""
    return _accelerator_state is not None and _accelerator_state.partial_state is _process_state


class AcceleratorState:
    """What the first `Accelerator` of the process fixed, plus the process facts.

    `AcceleratorState()` returns it from anywhere once an Accelerator exists; passing a
    `mixed_precision` other than the one in force, or `cpu=True` on a GPU process, raises.
    """

    def __new__(cls, mixed_precision: str | None = None, cpu: bool = False, **kwargs):
        if not is_initialized():
            raise ValueError(
                "AcceleratorState() needs an Accelerator: create `accelerator = Accelerator()` "
                "first (PartialState() gives the process facts without one)"
            )
        _accelerator_state.check_compatible(mixed_precision, cpu)
        return _accelerator_state

    def __init__(self, mixed_precision: str | None = None, cpu: bool = False, **kwargs) -> None:
        pass  # built once, by accelerator_state_for

    # HF answers these with None unless the backend is configured; runtime never configures it
    deepspeed_plugin = None
    deepspeed_plugins = None
    fsdp_plugin = None
    megatron_lm_plugin = None
    torch_tp_plugin = None
    parallelism_config = None
    device_mesh = None
    dynamo_plugin = None
    is_fsdp2 = False
    initialized = True

    def check_compatible(self, mixed_precision: str | None, cpu: bool) -> None:
        flag = None
        if cpu and self.partial_state.device.type != "cpu":
            flag = "cpu=True"
        elif mixed_precision is not None and str(mixed_precision).lower() != self.mixed_precision:
            flag = f"mixed_precision={str(mixed_precision)!r}"
        if flag:
            raise ValueError(
                f"AcceleratorState has already been initialized (mixed_precision="
                f"{self.mixed_precision!r}, device {self.partial_state.device}) and cannot be "
                f"changed: pass {flag} to the first Accelerator of the process"
            )

    @property
    def scaler(self):
        return self._scaler

    @property
    def distributed_type(self) -> DistributedType:
        return self.__dict__.get("_distributed_type") or self.partial_state.distributed_type

    @distributed_type.setter
    def distributed_type(self, value: DistributedType) -> None:
        """Overrides what this state reports (HF's tests do this); the run itself is unchanged."""
        self._distributed_type = value

    def __getattr__(self, name: str):
        # reached only for missing attributes: after `_reset_state()` the state is emptied
        if name in _ACCELERATOR_STATE_ATTRIBUTES:
            raise AttributeError(
                f"`AcceleratorState` object has no attribute `{name}`. This happens if "
                "`AcceleratorState._reset_state()` was called and an `Accelerator` or "
                "`PartialState` was not reinitialized."
            )
        raise AttributeError(f"'AcceleratorState' object has no attribute '{name}'")

    def get_deepspeed_plugin(self, name: str):
        raise NotImplementedError("DeepSpeed is not supported by runtime (DDP only)")

    def select_deepspeed_plugin(self, name: str | None = None):
        raise NotImplementedError("DeepSpeed is not supported by runtime (DDP only)")

    @staticmethod
    def _reset_state(reset_partial_state: bool = False) -> None:
        """Forgets the Accelerator-level state (and the gradient state); for tests, as in HF:
        Accelerators made before then fail clearly when they next use it."""
        global _accelerator_state
        if _accelerator_state is not None:
            _accelerator_state.__dict__.clear()
        _accelerator_state = None
        GradientState._reset_state()
        if reset_partial_state:
            PartialState._reset_state()

    def __repr__(self) -> str:
        return f"{self.partial_state!r}\nMixed precision type: {self.mixed_precision}\n"


_PROCESS_FACTS = (
    "device",
    "num_processes",
    "process_index",
    "local_process_index",
    "backend",
    "use_distributed",
    "is_main_process",
    "is_local_main_process",
    "is_last_process",
    "fork_launched",
    "wait_for_everyone",
    "main_process_first",
    "local_main_process_first",
    "split_between_processes",
    "print",
    "destroy_process_group",
)
for _fact in _PROCESS_FACTS:  # AcceleratorState answers these from the PartialState
    setattr(
        AcceleratorState,
        _fact,
        property(lambda self, name=_fact: getattr(self.partial_state, name)),
    )

_accelerator_state: AcceleratorState | None = None
_ACCELERATOR_STATE_ATTRIBUTES = {"partial_state", "mixed_precision", "_scaler", *_PROCESS_FACTS}


def accelerator_state_for(
    mixed_precision: str | None, cpu: bool, init_kwargs: dict | None = None, check=None
) -> AcceleratorState:
    """The AcceleratorState an `Accelerator(...)` joins: created by the first, checked after.

    `check(mixed_precision, device)` may refuse the first one's choice; nothing is kept then.
    """
    global _accelerator_state
    partial = get_process_state(cpu=cpu, init_kwargs=init_kwargs)
    if is_initialized():
        _accelerator_state.check_compatible(mixed_precision, cpu)
        return _accelerator_state
    state = object.__new__(AcceleratorState)
    state.partial_state = partial
    state.mixed_precision = (
        mixed_precision or os.environ.get("ACCELERATE_MIXED_PRECISION") or "no"
    ).lower()
    if check is not None:
        check(state.mixed_precision, partial.device)
    state._scaler = None
    _accelerator_state = state
    return state
