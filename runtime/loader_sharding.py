"""`prepare_data_loader`: the loader a process iterates in place of the script's.

A map-style loader gets its batch sampler sharded (`runtime.sampling.BatchShard`), an
iterable one its stream (`IterableShard`); with `dispatch_batches` process 0 reads and sends
each process its slice (`runtime.dispatching`). What the prepared loaders do is in
`runtime.data`.
"""

from __future__ import annotations

import copy

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)

from runtime.data import PreparedDataLoader
from runtime.dispatching import DataLoaderDispatcher
from runtime.sampling import BatchShard, IterableShard, SeedableRandomSampler, sync_sampler_rng


def _seedable(sampler, data_seed: int | None):
    """HF's `use_seedable_sampler`: a RandomSampler becomes a SeedableRandomSampler."""
    if not isinstance(sampler, RandomSampler):
        return sampler
    return SeedableRandomSampler(
        sampler.data_source,
        replacement=sampler.replacement,
        num_samples=sampler._num_samples,
        generator=sampler.generator,
        data_seed=data_seed,
    )


def prepare_data_loader(
    loader: DataLoader,
    *,
    state,
    gradient_state,
    split_batches: bool,
    even_batches: bool,
    device_placement: bool,
    dispatch_batches: bool | None = None,
    use_seedable_sampler: bool = False,
    data_seed: int | None = None,
    non_blocking: bool = False,
    num_processes: int | None = None,
    process_index: int | None = None,
    slice_fn=None,
) -> PreparedDataLoader:
    """Wraps `loader` for this rank (see the module docstring). `dispatch_batches` (by
    default: for an IterableDataset whose batches go to the device) makes process 0 read
    every batch and send each process its part (`DataLoaderDispatcher`)."""
    N = state.num_processes if num_processes is None else num_processes
    r = state.process_index if process_index is None else process_index
    iterable = isinstance(loader.dataset, IterableDataset)
    if dispatch_batches is None:
        dispatch_batches = device_placement and iterable
    if dispatch_batches and not device_placement:
        raise ValueError(
            "dispatch_batches=True needs the batches placed on the device (device_placement)"
        )
    sampler_batches = loader.batch_sampler is None and isinstance(loader.sampler, BatchSampler)
    batch_sampler = loader.sampler if sampler_batches else loader.batch_sampler
    if not iterable and batch_sampler is None:
        raise ValueError(
            "prepare: a DataLoader with batch_size=None needs a BatchSampler as its sampler "
            "(each item is then a batch of indices); this loader yields single samples"
        )
    if use_seedable_sampler and not iterable and isinstance(batch_sampler.sampler, RandomSampler):
        batch_sampler = copy.copy(batch_sampler)  # the user's loader keeps its own sampler
        batch_sampler.sampler = _seedable(batch_sampler.sampler, data_seed)
    common = {
        "device": state.device if device_placement else None,
        "gradient_state": gradient_state,
        "num_processes": N,
        "process_index": r,
        "split_batches": split_batches,
        "even_batches": even_batches,
        "non_blocking": non_blocking,
    }
    if iterable:
        batching = {
            "dataset": loader.dataset,
            "batch_size": loader.batch_size,
            "drop_last": loader.drop_last,
        }
    elif sampler_batches:
        batching = {"dataset": loader.dataset, "sampler": batch_sampler, "batch_size": None}
    else:
        batching = {"dataset": loader.dataset, "batch_sampler": batch_sampler}
    if dispatch_batches and N > 1:
        return DataLoaderDispatcher(loader, batching, slice_fn=slice_fn, **common)
    if iterable:
        if N > 1:
            batching["dataset"] = IterableShard(
                loader.dataset,
                batch_size=loader.batch_size,
                drop_last=loader.drop_last,
                num_processes=N,
                process_index=r,
                split_batches=split_batches,
            )
            if split_batches:
                batching["batch_size"] = loader.batch_size // N
        return PreparedDataLoader(loader, batching, **common)
    sampler = batch_sampler.sampler if hasattr(batch_sampler, "sampler") else None
    explicit = [
        g
        for g in (getattr(sampler, "generator", None), loader.generator)
        if isinstance(g, torch.Generator)
    ]
    seeded_per_epoch = isinstance(sampler, SeedableRandomSampler)
    needs_sync = N > 1 and not isinstance(sampler, SequentialSampler) and not seeded_per_epoch
    global_rng = needs_sync and getattr(sampler, "generator", None) is None
    shard = BatchShard(
        batch_sampler,
        num_processes=N,
        process_index=r,
        split_batches=split_batches,
        even_batches=even_batches,
        batch_size=getattr(batch_sampler, "batch_size", loader.batch_size),
        rng_sync=sync_sampler_rng(global_rng, explicit) if needs_sync else None,
    )
    batching["sampler" if sampler_batches else "batch_sampler"] = shard
    return PreparedDataLoader(loader, batching, **common)
