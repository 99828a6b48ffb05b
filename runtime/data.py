"""Sharded data loaders.

A prepared loader is a `DataLoader` over the same dataset, collate function, workers and
generator, whose batch sampler wraps the original one: every rank iterates the original
batch sampler (so the sampler draws from the RNG exactly as the un-migrated script does) and
keeps its share. `split_batches=False`: rank r takes batches r, r+N, ...; `True`: rank r takes
slice r of every batch. `even_batches=True` completes the tail with samples from the start of
the epoch so all ranks see equal batches; `gather_for_metrics` later drops those duplicates.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.utils.data import (
    DataLoader,
    IterableDataset,
)

from runtime.sampling import BatchShard


def send_to_device(data: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Moves a batch to `device` as HF Accelerate does: a tensor, or any object with `.to`
    (BatchEncoding, DETR's NestedTensor, a batch class of the script's own), is moved by its
    own `.to`; lists, tuples (namedtuples too) and mappings are walked; anything else stays."""
    if isinstance(data, torch.Tensor):
        return data if data.device == device else data.to(device, non_blocking=non_blocking)
    if hasattr(data, "to"):
        try:
            return data.to(device, non_blocking=non_blocking)
        except TypeError:  # a `.to(device)` of the script's own, without non_blocking=
            return data.to(device)
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(send_to_device(item, device, non_blocking) for item in data))
    if isinstance(data, (list, tuple)):
        return type(data)(send_to_device(item, device, non_blocking) for item in data)
    if isinstance(data, Mapping):
        return type(data)(
            {key: send_to_device(value, device, non_blocking) for key, value in data.items()}
        )
    return data


def loader_settings(loader: DataLoader) -> dict:
    """The DataLoader arguments besides dataset, batching and sampling."""
    settings = {
        "num_workers": loader.num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "persistent_workers": loader.persistent_workers,
        "pin_memory_device": loader.pin_memory_device,
    }
    if loader.num_workers:
        settings["prefetch_factor"] = loader.prefetch_factor
    if hasattr(loader, "in_order"):
        settings["in_order"] = loader.in_order
    return settings


def _capture_rng(generators: list[torch.Generator]) -> dict:
    return {"torch": torch.get_rng_state(), "generators": [g.get_state() for g in generators]}


def _restore_rng(saved: dict, generators: list[torch.Generator]) -> None:
    torch.set_rng_state(saved["torch"])
    for generator, state in zip(generators, saved["generators"]):
        generator.set_state(state)


class PreparedDataLoader(DataLoader):
    """A DataLoader yielding this rank's batches on the device; `isinstance(x, DataLoader)` holds.

    `batching` holds what the inner DataLoader iterates: the dataset and a `BatchShard` (as
    `batch_sampler`, or as `sampler` when the original sampler is itself a BatchSampler), or
    an `IterableShard` and a batch size. While iterated, it knows whether the current batch
    is the last one (`end_of_dataloader`) and how many real samples the last global batch
    holds (`remainder`), which `gather_for_metrics` uses, and how far the epoch has got (for
    `save_state`).
    """

    def __init__(
        self,
        original: DataLoader,
        batching: dict,
        *,
        device,
        gradient_state,
        num_processes: int,
        process_index: int,
        split_batches: bool,
        even_batches: bool,
        non_blocking: bool = False,
    ) -> None:
        super().__init__(**batching, **loader_settings(original))
        self.iterable = isinstance(original.dataset, IterableDataset)
        self.shard = next(
            (part for part in batching.values() if isinstance(part, BatchShard)), None
        )
        self.original_batch_size = original.batch_size
        if self.original_batch_size is None and self.shard is not None:
            self.original_batch_size = self.shard.batch_size
        if "batch_sampler" in batching:
            # users read these for logging and epoch bookkeeping
            object.__setattr__(self, "sampler", getattr(batching["batch_sampler"], "sampler", None))
            per_process = self.original_batch_size
            if split_batches and per_process is not None:
                per_process //= num_processes
            object.__setattr__(self, "batch_size", per_process)
        self.device = device
        self.gradient_state = gradient_state
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.non_blocking = non_blocking
        self.skip_batches = 0  # IterableDataset / dispatch: this rank's first batches, skipped
        self.end_of_dataloader = False
        self.batches_yielded = 0
        self.in_epoch = False
        self.epoch_start_rng: dict | None = None
        self.resume_from: dict | None = None
        self._is_accelerate_prepared = True

    @property
    def generators(self) -> list[torch.Generator]:
        found = []
        for generator in (getattr(self.sampler, "generator", None), self.generator):
            if isinstance(generator, torch.Generator) and all(generator is not g for g in found):
                found.append(generator)
        return found

    @property
    def total_batch_size(self) -> int | None:
        if self.original_batch_size is None:
            return None
        return self.original_batch_size * (1 if self.split_batches else self.num_processes)

    @property
    def remainder(self) -> int:
        """Real samples in the last global batch; -1 when unknown or nothing is padded."""
        if self.iterable:
            # HF's count over the per-process stream: its padding is never dropped
            try:
                return len(self.dataset) % self.batch_size
            except TypeError:
                return -1
        if self.shard is None or self.total_batch_size is None or self.shard.drop_last:
            return -1
        try:
            count = len(self.shard.sampler) if self.shard.sampler is not None else len(self.dataset)
        except TypeError:
            return -1
        return count % self.total_batch_size

    def set_epoch(self, epoch: int) -> None:
        """Forwards to the sampler, batch sampler and dataset that have `set_epoch`."""
        if self.shard is not None:
            self.shard.set_epoch(epoch)
        elif hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def skipping(self, batches: int) -> PreparedDataLoader:
        """This loader without its first `batches` batches on this rank, every epoch (HF's
        `skip_first_batches`). Skipped at index level: those batches are never loaded. A
        position restored by `load_state` moves to the new loader, so the resumed epoch
        replays the interrupted one's shuffle."""
        clone = copy.copy(self)
        object.__setattr__(clone, "_iterator", None)
        if self.shard is None:
            clone.skip_batches = self.skip_batches + batches
        else:
            shard = self.shard.skipping(batches)
            clone.shard = shard
            place = "sampler" if self.sampler is self.shard else "batch_sampler"
            object.__setattr__(clone, place, shard)
        clone.resume_from, self.resume_from = self.resume_from, None
        clone.end_of_dataloader = clone.in_epoch = False
        return clone

    def _skipped(self) -> int:
        return self.skip_batches if self.shard is None else self.shard.skip_first

    def position(self) -> dict | None:
        """Where the current epoch stands, for `save_state`; None between epochs."""
        if not self.in_epoch:
            return None
        return {"batches_yielded": self.batches_yielded, "epoch_start_rng": self.epoch_start_rng}

    def _rank_batches(self) -> Iterator:
        """This rank's batches, before placement."""
        return itertools.islice(super().__iter__(), self.skip_batches, None)

    def __iter__(self):
        resume, self.resume_from = self.resume_from, None
        generators = self.generators
        resumed_from_rng = None
        if resume is not None and self.shard is not None:
            # replay the interrupted epoch's random draws (its shuffle) from its start; the
            # script skips the batches it had consumed (skip_first_batches), as with HF
            resumed_from_rng = _capture_rng(generators)
            _restore_rng(resume["epoch_start_rng"], generators)
        self.epoch_start_rng = _capture_rng(generators)
        self.batches_yielded = self._skipped()
        self.end_of_dataloader = False
        self.in_epoch = True
        self.gradient_state.active_loaders.append(self)
        try:
            batches = self._rank_batches()
            current = next(batches, None)
            if resumed_from_rng is not None:
                _restore_rng(resumed_from_rng, generators)
            if current is None:
                return
            for following in batches:
                self.batches_yielded += 1
                yield self._placed(current)
                current = following
            self.end_of_dataloader = True
            self.batches_yielded += 1
            yield self._placed(current)
        finally:
            self.end_of_dataloader = False
            self.in_epoch = False
            if self in self.gradient_state.active_loaders:
                self.gradient_state.active_loaders.remove(self)

    def _placed(self, batch: Any) -> Any:
        if self.device is None:
            return batch
        return send_to_device(batch, self.device, self.non_blocking or self.pin_memory)


class _SkipBatches:
    """A batch sampler without the first `skipped` batches of another (every epoch)."""

    def __init__(self, batch_sampler, skipped: int) -> None:
        self.batch_sampler = batch_sampler
        self.skipped = skipped

    @property
    def sampler(self):
        return getattr(self.batch_sampler, "sampler", None)

    @property
    def batch_size(self):
        return getattr(self.batch_sampler, "batch_size", None)

    @property
    def drop_last(self):
        return getattr(self.batch_sampler, "drop_last", False)

    def __iter__(self):
        return itertools.islice(iter(self.batch_sampler), self.skipped, None)

    def __len__(self) -> int:
        return max(0, len(self.batch_sampler) - self.skipped)


class _SkippingIterableLoader(DataLoader):
    """A loader over an IterableDataset that drops its first `skipped` batches every epoch."""

    def __init__(self, *args, skipped: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.skipped = skipped

    def __iter__(self):
        return itertools.islice(super().__iter__(), self.skipped, None)


def skip_first_batches(loader: DataLoader, batches: int) -> DataLoader:
    """A loader like `loader` without its first `batches` batches (on this rank, if prepared)."""
    if isinstance(loader, PreparedDataLoader):
        return loader.skipping(batches)
    settings = loader_settings(loader)
    if isinstance(loader.dataset, IterableDataset):
        return _SkippingIterableLoader(
            loader.dataset,
            batch_size=loader.batch_size,
            drop_last=loader.drop_last,
            skipped=batches,
            **settings,
        )
    sampler = _SkipBatches(loader.batch_sampler, batches)
    return DataLoader(loader.dataset, batch_sampler=sampler, **settings)
