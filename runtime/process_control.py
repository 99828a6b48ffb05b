"""The Accelerator's process-control methods (HF semantics): which process runs what, and when.

`split_between_processes`, the `on_*_process` decorators, `main_process_first`, barriers,
`print`, the cross-process trigger (`set_trigger` / `check_trigger`) and `join_uneven_inputs`.
A mixin of `Accelerator`; it reads `self.state` (the shared process state).
"""

from __future__ import annotations

import functools
import warnings
from contextlib import contextmanager
from typing import Any

import torch

from runtime import collectives
from runtime.config import DistributedType


class ProcessControl:
    def wait_for_everyone(self) -> None:
        self.state.wait_for_everyone()

    def print(self, *args, **kwargs) -> None:
        """`print` on the local main process only (once per node)."""
        self.state.print(*args, **kwargs)

    @contextmanager
    def main_process_first(self):
        with self.state.main_process_first():
            yield

    @contextmanager
    def local_main_process_first(self):
        with self.state.local_main_process_first():
            yield

    @contextmanager
    def split_between_processes(self, inputs: Any, apply_padding: bool = False):
        """This process's contiguous share of a list, tuple, tensor, dict of those, or dataset."""
        with self.state.partial_state.split_between_processes(inputs, apply_padding) as share:
            yield share

    # ---- decorators: the function runs on the chosen process(es), returns None elsewhere --
    def _runs_only_where(self, chooses, function):
        @functools.wraps(function)
        def on_chosen_processes(*args, **kwargs):
            if chooses(self.state.partial_state) or not self.use_distributed:
                return function(*args, **kwargs)
            return None

        return on_chosen_processes

    def on_main_process(self, function):
        return self._runs_only_where(lambda state: state.is_main_process, function)

    def on_local_main_process(self, function):
        return self._runs_only_where(lambda state: state.is_local_main_process, function)

    def on_last_process(self, function):
        return self._runs_only_where(lambda state: state.is_last_process, function)

    def on_process(self, function=None, process_index: int | None = None):
        if function is None:
            return functools.partial(self.on_process, process_index=process_index)
        return self._runs_only_where(lambda state: state.process_index == process_index, function)

    def on_local_process(self, function=None, local_process_index: int | None = None):
        if function is None:
            return functools.partial(self.on_local_process, local_process_index=local_process_index)
        return self._runs_only_where(
            lambda state: state.local_process_index == local_process_index, function
        )

    # ---- a flag any process can raise, read by all -------------------------------------
    def set_trigger(self) -> None:
        """Raises this process's flag; the next `check_trigger` on every process sees it."""
        self.flag_tensor = torch.tensor(1, device=self.device)

    def check_trigger(self) -> bool:
        """True on every process if any process called `set_trigger` (then lowers the flag).
        A collective: every process must call it."""
        if self.flag_tensor is None:
            self.flag_tensor = torch.tensor(0, device=self.device)
        if collectives.reduce(self.flag_tensor, "sum").item() >= 1:
            self.flag_tensor = torch.tensor(0, device=self.device)
            return True
        return False

    # ---- uneven inputs -----------------------------------------------------------------
    @contextmanager
    def join_uneven_inputs(self, joinables: list, even_batches: bool | None = None):
        """`torch.distributed.algorithms.Join` over the DDP models in `joinables`, so ranks
        with fewer batches do not hang the others. It is enabled when `even_batches` is off
        (the argument overrides the prepared loaders' setting inside the block). HF does this
        on GPUs only; here it also works with gloo on CPU."""
        if self.distributed_type not in (DistributedType.MULTI_GPU, DistributedType.MULTI_CPU):
            if self.distributed_type != DistributedType.NO:
                warnings.warn(
                    "Joining uneven inputs is only supported for multi-GPU (and, in runtime, "
                    f"multi-CPU) DDP training, not {self.distributed_type}: "
                    "`join_uneven_inputs` will have no effect.",
                    stacklevel=3,
                )
            yield
            return
        from torch.distributed.algorithms import Join

        restore = []
        if even_batches is not None:
            overridden = [loader for loader in self._dataloaders if loader.shard is not None]
            if len(overridden) < len(self._dataloaders):
                warnings.warn(
                    "Overriding even_batches is only supported for map-style datasets, yet some "
                    "dataloaders given were iterable (or dispatched)",
                    stacklevel=3,
                )
            for loader in overridden:
                restore.append((loader.shard, loader.shard.even_batches))
                loader.shard.even_batches = even_batches
        else:
            even_batches = self.even_batches
        try:
            with Join(joinables, enable=not even_batches, throw_on_early_termination=False):
                yield
        finally:
            for shard, value in restore:
                shard.even_batches = value
