"""Sharded data loaders.

A prepared loader is a `DataLoader` over the same dataset, collate function, workers and
generator, whose batch sampler wraps the original one: every rank iterates the original
batch sampler (so the sampler draws from the RNG exactly as the un-migrated script does) and
keeps its share. `split_batches=False`: rank r takes batches r, r+N, ...; `True`: rank r takes
slice r of every batch. `even_batches=True` completes the tail with samples from the start of
the epoch so all ranks see equal batches; `gather_for_metrics` later drops those duplicates.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader, IterableDataset, SequentialSampler

from runtime.collectives import apply_to_tensors, broadcast_from_main


def _take(pool: Iterator, count: int) -> list:
    return list(itertools.islice(pool, count))


class BatchShard:
    """This rank's share of an original batch sampler (see module docstring)."""

    def __init__(
        self,
        batch_sampler,
        *,
        num_processes: int,
        process_index: int,
        split_batches: bool,
        even_batches: bool,
        batch_size: int | None,
        rng_sync=None,
    ) -> None:
        self.batch_sampler = batch_sampler
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.batch_size = batch_size
        self.drop_last = bool(getattr(batch_sampler, "drop_last", False))
        self.rng_sync = rng_sync
        self.skip_batches = 0  # set by a resumed loader; consumed by the next iteration
        if split_batches and batch_size is not None and batch_size % num_processes:
            raise ValueError(
                f"split_batches=True needs a batch size divisible by the {num_processes} "
                f"processes; the loader's batch size is {batch_size}"
            )

    @property
    def sampler(self):
        return getattr(self.batch_sampler, "sampler", None)

    def set_epoch(self, epoch: int) -> None:
        for target in (self.batch_sampler, self.sampler):
            if target is not None and hasattr(target, "set_epoch"):
                target.set_epoch(epoch)

    def __len__(self) -> int:
        count, N, r = len(self.batch_sampler), self.num_processes, self.process_index
        if N == 1:
            return count
        if self.split_batches:
            if self.even_batches or self.drop_last or self.batch_size is None:
                return count
            tail = self._sample_count() % self.batch_size
            per = self.batch_size // N
            return count if tail == 0 or tail > per * r else count - 1
        if count % N == 0 or self.drop_last:
            return count // N
        if self.even_batches:
            return count // N + 1
        return count // N + (1 if r < count % N else 0)

    def _sample_count(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[list]:
        skip, self.skip_batches = self.skip_batches, 0
        source = iter(self.batch_sampler)
        with self.rng_sync() if self.rng_sync else _no_context():
            first = next(source, None)  # the sampler draws its permutation here
        if first is None:
            return
        batches = itertools.chain([first], source)
        if self.num_processes == 1:
            mine = batches
        elif self.split_batches:
            mine = self._split(batches)
        else:
            mine = self._unsplit(batches)
        yield from itertools.islice(mine, skip, None)

    def _unsplit(self, batches: Iterator[list]) -> Iterator[list]:
        N, r = self.num_processes, self.process_index
        head: list = []
        group: list = []
        size = self.batch_size
        for index, batch in enumerate(batches):
            if index < N:
                head.extend(batch)
            if size is None:
                size = len(batch)
            group.append(batch)
            if len(group) == N and len(batch) == size:
                yield group[r]
                group = []
        if not group or self.drop_last:
            return
        if not self.even_batches:
            if r < len(group):
                yield group[r]
            return
        pool = itertools.cycle(head)
        tail = [list(batch) for batch in group]
        tail[-1].extend(_take(pool, size - len(tail[-1])))
        while len(tail) < N:
            tail.append(_take(pool, size))
        yield tail[r]

    def _split(self, batches: Iterator[list]) -> Iterator[list]:
        N, r = self.num_processes, self.process_index
        head: list | None = None
        last: list | None = None
        for batch in batches:
            if head is None:
                head = list(batch)
            size = self.batch_size or len(batch)
            if len(batch) == size:
                if size % N:
                    raise ValueError(f"split_batches=True: a batch of {size} cannot split {N} ways")
                per = size // N
                yield batch[r * per : (r + 1) * per]
            else:
                last = list(batch)
        if last is None or self.batch_size is None:
            return
        per = self.batch_size // N
        if self.even_batches:
            last.extend(_take(itertools.cycle(head), self.batch_size - len(last)))
        if len(last) > r * per:
            yield last[r * per : (r + 1) * per]


@contextmanager
def _no_context():
    yield


def sync_sampler_rng(global_rng: bool, generators: list[torch.Generator]):
    """A context making the sampler draw as rank 0 does, so every rank sees one global order.

    Explicit generators take rank 0's state for good (as HF Accelerate does). The global RNG
    is borrowed: inside the context it holds rank 0's state, afterwards each rank's own state
    returns, so per-rank randomness (dropout under a device-specific seed) is untouched.
    """

    @contextmanager
    def context():
        for generator in generators:
            generator.set_state(broadcast_from_main(generator.get_state()))
        if not global_rng:
            yield
            return
        own = torch.get_rng_state()
        main = broadcast_from_main(own)
        if torch.equal(own, main):
            yield
            return
        torch.set_rng_state(main)
        try:
            yield
        finally:
            torch.set_rng_state(own)

    return context


def send_to_device(data: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Moves every tensor of a batch to `device`; objects with `.to` (BatchEncoding) move too."""
    if hasattr(data, "to") and not isinstance(data, torch.Tensor) and hasattr(data, "keys"):
        return data.to(device)
    return apply_to_tensors(lambda tensor: tensor.to(device, non_blocking=non_blocking), data)


def _capture_rng(generators: list[torch.Generator]) -> dict:
    return {"torch": torch.get_rng_state(), "generators": [g.get_state() for g in generators]}


def _restore_rng(saved: dict, generators: list[torch.Generator]) -> None:
    torch.set_rng_state(saved["torch"])
    for generator, state in zip(generators, saved["generators"]):
        generator.set_state(state)


class PreparedDataLoader(DataLoader):
    """A DataLoader yielding this rank's batches on the device; `isinstance(x, DataLoader)` holds.

    It also knows, while iterated, whether the current batch is the last one
    (`end_of_dataloader`) and how many real samples the last global batch holds (`remainder`),
    which `gather_for_metrics` uses, and how far the epoch has got (for `save_state`).
    """

    def __init__(self, original: DataLoader, batch_shard, *, device, gradient_state,
                 num_processes: int, process_index: int, split_batches: bool,
                 even_batches: bool) -> None:
        iterable = isinstance(original.dataset, IterableDataset)
        extra = {"prefetch_factor": original.prefetch_factor} if original.num_workers else {}
        if hasattr(original, "in_order"):
            extra["in_order"] = original.in_order
        super().__init__(
            original.dataset,
            batch_size=1 if not iterable else original.batch_size,
            batch_sampler=batch_shard if not iterable else None,
            drop_last=original.drop_last if iterable else False,
            num_workers=original.num_workers,
            collate_fn=original.collate_fn,
            pin_memory=original.pin_memory,
            timeout=original.timeout,
            worker_init_fn=original.worker_init_fn,
            multiprocessing_context=original.multiprocessing_context,
            generator=original.generator,
            persistent_workers=original.persistent_workers,
            pin_memory_device=original.pin_memory_device,
            **extra,
        )
        self.original_batch_size = original.batch_size
        if not iterable:
            # users read these for logging and epoch bookkeeping
            object.__setattr__(self, "sampler", original.sampler)
            per_process = original.batch_size
            if split_batches and per_process is not None:
                per_process //= num_processes
            object.__setattr__(self, "batch_size", per_process)
        self.device = device
        self.gradient_state = gradient_state
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.iterable = iterable
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
        if self.iterable or self.total_batch_size is None:
            return -1
        shard = self.batch_sampler
        if shard.drop_last:
            return -1
        try:
            count = len(shard.sampler) if shard.sampler is not None else len(self.dataset)
        except TypeError:
            return -1
        return count % self.total_batch_size

    def set_epoch(self, epoch: int) -> None:
        """Forwards to the sampler, batch sampler and dataset that have `set_epoch`."""
        if isinstance(self.batch_sampler, BatchShard):
            self.batch_sampler.set_epoch(epoch)
        elif hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def position(self) -> dict | None:
        """Where the current epoch stands, for `save_state`; None between epochs."""
        if not self.in_epoch:
            return None
        return {"batches_yielded": self.batches_yielded, "epoch_start_rng": self.epoch_start_rng}

    def __iter__(self):
        resume, self.resume_from = self.resume_from, None
        generators = self.generators
        resumed_from_rng = None
        if resume is not None and not self.iterable:
            # replay the epoch's random draws from its start, then skip what was consumed
            resumed_from_rng = _capture_rng(generators)
            _restore_rng(resume["epoch_start_rng"], generators)
            self.batch_sampler.skip_batches = resume["batches_yielded"]
        self.epoch_start_rng = _capture_rng(generators)
        self.batches_yielded = resume["batches_yielded"] if resumed_from_rng is not None else 0
        self.end_of_dataloader = False
        self.in_epoch = True
        self.gradient_state.active_loaders.append(self)
        try:
            batches = super().__iter__()
            if self.iterable:
                batches = self._iterable_share(batches)
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
        return send_to_device(batch, self.device, self.pin_memory)

    def _iterable_share(self, batches: Iterator) -> Iterator:
        """IterableDataset: every rank reads the stream and keeps its batches (or slices)."""
        N, r = self.num_processes, self.process_index
        if N == 1:
            yield from batches
            return
        if self.split_batches:
            for batch in batches:
                yield apply_to_tensors(lambda t: t.tensor_split(N)[r], batch)
            return
        head: list = []
        group: list = []
        for batch in batches:
            if len(head) < N:
                head.append(batch)
            group.append(batch)
            if len(group) == N:
                yield group[r]
                group = []
        if group:
            if r < len(group):
                yield group[r]
            elif self.even_batches:
                yield head[(r - len(group)) % len(head)]


def prepare_data_loader(loader: DataLoader, *, state, gradient_state, split_batches: bool,
                        even_batches: bool, device_placement: bool) -> PreparedDataLoader:
    """Wraps `loader` for this rank (see the module docstring)."""
    N, r = state.num_processes, state.process_index
    device = state.device if device_placement else None
    shard = None
    if not isinstance(loader.dataset, IterableDataset):
        original = loader.batch_sampler
        sampler = getattr(original, "sampler", None)
        explicit = [g for g in (getattr(sampler, "generator", None), loader.generator)
                    if isinstance(g, torch.Generator)]
        needs_sync = N > 1 and not isinstance(sampler, SequentialSampler)
        global_rng = needs_sync and getattr(sampler, "generator", None) is None
        shard = BatchShard(
            original,
            num_processes=N,
            process_index=r,
            split_batches=split_batches,
            even_batches=even_batches,
            batch_size=getattr(original, "batch_size", loader.batch_size),
            rng_sync=sync_sampler_rng(global_rng, explicit) if needs_sync else None,
        )
    return PreparedDataLoader(
        loader, shard, device=device, gradient_state=gradient_state, num_processes=N,
        process_index=r, split_batches=split_batches, even_batches=even_batches,
    )
