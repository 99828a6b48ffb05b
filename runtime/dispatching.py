"""Dispatched loaders: process 0 reads every batch and each process gets its part.

HF Accelerate's `dispatch_batches=True`, its default for an `IterableDataset` whose batches
go to the device. Process 0 iterates the original loader; each step it reads N batches and
concatenates them (one batch with `split_batches=True`), sends their structure and then the
tensors to every process (`broadcast`), and process r keeps the r-th of N equal contiguous
slices. A last global batch whose size does not divide by N is completed with the first
samples of the first global batch, and `remainder` tells `gather_for_metrics` how many of
the gathered samples are real, so metrics see every sample exactly once. A partial group of
batches is dispatched too, unless the loader drops its last batch (`drop_last`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import torch
from torch.utils.data import DataLoader

from runtime.collectives import apply_to_tensors, broadcast, broadcast_object_list, is_tensor_tree
from runtime.data import PreparedDataLoader, send_to_device


class _TensorSpec(NamedTuple):
    shape: tuple
    dtype: torch.dtype


def slice_tensors(data: Any, where: slice, process_index=None, num_processes=None) -> Any:
    """`where` of every tensor of a batch (the default `slice_fn_for_dispatch`)."""
    return apply_to_tensors(lambda tensor: tensor[where], data)


def concatenate(batches: list) -> Any:
    """The batches joined on dim 0, structure kept (lists, tuples, dicts of tensors)."""
    first = batches[0]
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(concatenate([b[i] for b in batches]) for i in range(len(first))))
    if isinstance(first, (list, tuple)):
        return type(first)(concatenate([b[i] for b in batches]) for i in range(len(first)))
    if isinstance(first, Mapping):
        return type(first)({key: concatenate([b[key] for b in batches]) for key in first})
    if isinstance(first, torch.Tensor):
        return torch.cat(batches, dim=0)
    raise TypeError(f"dispatch_batches: can only concatenate tensors, got {type(first).__name__}")


def _batch_size(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return batch.shape[0]
    items = list(batch.values()) if isinstance(batch, Mapping) else list(batch)
    if not items:
        raise ValueError("dispatch_batches: cannot find the batch size of an empty batch")
    return _batch_size(items[0])


class DataLoaderDispatcher(PreparedDataLoader):
    """A prepared loader whose batches process 0 reads and dispatches (module docstring)."""

    def __init__(self, original: DataLoader, batching: dict, *, slice_fn=None, **common) -> None:
        super().__init__(original, batching, **common)
        self.slice_fn = slice_fn or slice_tensors
        self.drops_last = original.drop_last
        self.last_global_size = -1

    @property
    def remainder(self) -> int:
        """Samples in the last global batch, once it is reached (-1 before)."""
        return self.last_global_size

    def __len__(self) -> int:
        whole = super().__len__()
        if self.split_batches:
            return whole
        if self.drops_last:
            return whole // self.num_processes
        return math.ceil(whole / self.num_processes)

    def _read_global_batch(self, source: Iterator) -> Any:
        """Process 0: the next global batch from the original loader, or None at the end."""
        N = self.num_processes
        pieces = list(itertools.islice(source, 1 if self.split_batches else N))
        if not pieces or (len(pieces) < N and not self.split_batches and self.drops_last):
            return None
        try:
            batch = pieces[0] if self.split_batches else concatenate(pieces)
        except RuntimeError as error:
            raise RuntimeError(
                "dispatch_batches=True (the default for an IterableDataset) joins the batches "
                "of one step, which must then have the same shapes but for the batch size: "
                "pass DataLoaderConfiguration(dispatch_batches=False) so each process reads "
                "its own batches, or split_batches=True"
            ) from error
        if not is_tensor_tree(batch):
            raise TypeError(
                "dispatch_batches=True sends batches as tensors: this loader yields batches "
                "holding other objects; pass DataLoaderConfiguration(dispatch_batches=False)"
            )
        return send_to_device(batch, self.device, self.non_blocking)

    def _receive(self, source: Iterator) -> Any:
        """The next global batch on every process (None at the end)."""
        batch, spec, failure = None, None, None
        if self.process_index == 0:
            try:
                batch = self._read_global_batch(source)
            except Exception as error:  # noqa: BLE001 - every process must raise it, not hang
                failure = error
            if batch is not None:
                spec = apply_to_tensors(lambda t: _TensorSpec(tuple(t.shape), t.dtype), batch)
        message = [spec, None if failure is None else f"{type(failure).__name__}: {failure}"]
        spec, problem = broadcast_object_list(message)
        if failure is not None:
            raise failure
        if problem is not None:
            raise RuntimeError(f"process 0 could not read the next batch: {problem}")
        if spec is None:
            return None
        if batch is None:
            batch = apply_to_tensors(
                lambda s: torch.empty(s.shape, dtype=s.dtype, device=self.device),
                spec,
                leaf_type=_TensorSpec,
            )
        return broadcast(batch, from_process=0)

    def _rank_batches(self) -> Iterator:
        N, r = self.num_processes, self.process_index
        # every process starts the original loader's iteration (its seeds), as HF does;
        # only process 0 reads from it
        source = DataLoader.__iter__(self)
        self.last_global_size = -1
        head = None  # the first samples of the first global batch
        current = self._receive(source)
        index = 0
        while current is not None:
            following = self._receive(source)
            size = _batch_size(current)
            if head is None and not self.drops_last:
                head = self.slice_fn(current, slice(0, N), process_index=r, num_processes=N)
            per_process = size // N
            if following is None:
                self.last_global_size = size
                if size % N and not self.drops_last:
                    current = concatenate([current, head])
                    per_process += 1
            if index >= self.skip_batches:
                where = slice(r * per_process, (r + 1) * per_process)
                yield self.slice_fn(current, where, process_index=r, num_processes=N)
            index += 1
            current = following
