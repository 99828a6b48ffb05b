"""This rank's share of a loader's samples, and one global sampling order for all ranks.

`BatchShard` wraps the original batch sampler, so every rank iterates it exactly as the
un-migrated script would and keeps its share: `split_batches=False`: rank r takes batches
r, r+N, ...; `True`: rank r takes slice r of every batch. `even_batches=True` completes the
tail with samples from the start of the epoch so all ranks see equal batches.
`IterableShard` does the same per sample for an `IterableDataset` that every rank reads
(HF's `IterableDatasetShard`); `SeedableRandomSampler` is HF's reseeded-per-epoch sampler.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils.data import IterableDataset, RandomSampler

from runtime.collectives import broadcast_from_main


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
        skip_first: int = 0,
    ) -> None:
        self.batch_sampler = batch_sampler
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.batch_size = batch_size
        self.drop_last = bool(getattr(batch_sampler, "drop_last", False))
        self.rng_sync = rng_sync
        self.skip_first = skip_first  # this rank's first batches, skipped every epoch
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

    def skipping(self, batches: int) -> BatchShard:
        """The same share without its first `batches` batches (`skip_first_batches`)."""
        clone = copy.copy(self)
        clone.skip_first = self.skip_first + batches
        return clone

    def __len__(self) -> int:
        return max(0, self._share_length() - self.skip_first)

    def _share_length(self) -> int:
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
        # skipped at index level: the skipped batches are never loaded
        yield from itertools.islice(mine, self.skip_first, None)

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


class SeedableRandomSampler(RandomSampler):
    """A RandomSampler whose order is a function of `initial_seed + epoch` (HF's sampler for
    `use_seedable_sampler`): the same on every process without any communication, and
    replayable with `set_epoch`. It moves to the next epoch after each full pass."""

    def __init__(self, *args, data_seed: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.initial_seed = data_seed if data_seed is not None else torch.random.initial_seed()
        self.epoch = 0

    def __iter__(self):
        if self.generator is None:
            self.generator = torch.Generator()
        self.generator.manual_seed(self.initial_seed + self.epoch)
        yield from super().__iter__()
        self.set_epoch(self.epoch + 1)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


class IterableShard(IterableDataset):
    """This process's samples of an IterableDataset every process reads (HF's
    IterableDatasetShard): of each global batch of `batch_size * N` samples (`batch_size`
    with `split_batches`), process r keeps the r-th contiguous slice. A short last global
    batch is completed with samples from the first one, or dropped with `drop_last`."""

    def __init__(
        self,
        dataset: IterableDataset,
        *,
        batch_size: int,
        drop_last: bool,
        num_processes: int,
        process_index: int,
        split_batches: bool,
    ) -> None:
        if split_batches and batch_size > 1 and batch_size % num_processes:
            raise ValueError(
                f"split_batches=True needs a batch size divisible by the {num_processes} "
                f"processes; the loader's batch size is {batch_size}"
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def __len__(self) -> int:
        # HF's count: per process, in whole `batch_size` chunks of the padded global batches
        global_batches = len(self.dataset) / (self.batch_size * self.num_processes)
        rounded = math.floor(global_batches) if self.drop_last else math.ceil(global_batches)
        return rounded * self.batch_size

    def __iter__(self):
        N, r = self.num_processes, self.process_index
        global_size = self.batch_size if self.split_batches else self.batch_size * N
        per_process = global_size // N
        mine = slice(r * per_process, (r + 1) * per_process)
        first: list | None = None
        current: list = []
        for sample in self.dataset:
            current.append(sample)
            if len(current) == global_size:
                yield from current[mine]
                first = first if first is not None else current
                current = []
        if self.drop_last or not current:
            return
        pool = itertools.cycle(first if first is not None else list(current))
        current.extend(_take(pool, global_size - len(current)))
        yield from current[mine]
