"""Is the work shared? The samples each process drew from its training loaders, against the
original's (`hooks.WatchedIterator` counts them).

Under verify's split batches the processes of a right migration draw, together, what the
original drew (a padded last batch adds a few). N times that is a training loader that is not
sharded: every process trains on the whole data set; DistributedDataParallel averages N
identical gradients, so losses and weights agree with the original's, and N processes do
one process's work. 1/N of it is a loader sharded twice (its own DistributedSampler, and
`prepare`): each process sees a 1/N² share and an epoch is over N times too soon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from migrator.verify.records import RunRecord

CLOSE = 0.25  # a ratio within 25% of N (or 1/N) on a log scale is that


@dataclass
class Shares:
    original: int  # samples the original drew from its training loaders
    per_rank: list[int]  # each migrated process's
    problem: str | None = None
    code: str | None = None  # unsharded | sharded-twice

    @property
    def migrated(self) -> int:
        return sum(self.per_rank)


def _training_samples(observed: dict) -> dict[int, int]:
    return {
        loader["index"]: loader.get("samples", 0)
        for loader in observed.get("loaders", [])
        if loader.get("training")
    }


def _near(ratio: float, target: float) -> bool:
    return ratio > 0 and abs(math.log(ratio / target)) <= math.log(1 + CLOSE)


def compare_shares(original: RunRecord, migrated: RunRecord, nproc: int) -> Shares | None:
    """None when the original drew nothing from a loader it trained on (nothing to count)."""
    drawn = _training_samples(original.observed)
    if not drawn or not sum(drawn.values()) or nproc < 2:
        return None
    per_rank_loaders = [_training_samples(rank.observed) for rank in migrated.ranks]
    per_rank = [sum(loaders.values()) for loaders in per_rank_loaders]
    shares = Shares(sum(drawn.values()), per_rank)
    ratio = shares.migrated / shares.original
    each = ", ".join(str(count) for count in per_rank)
    if _near(ratio, nproc):
        which = _loaders_off(drawn, per_rank_loaders, nproc)
        shares.code = "unsharded"
        shares.problem = (
            f"the training data is not shared: the {nproc} processes drew {each} samples "
            f"from the training loader{which}, each as many as the original's "
            f"{shares.original} in all, so every process trains on the whole data set "
            "(losses and weights agree because DistributedDataParallel averages identical "
            f"gradients: {nproc} processes do one process's work); pass the loader to "
            "accelerator.prepare"
        )
    elif _near(ratio, 1 / nproc):
        which = _loaders_off(drawn, per_rank_loaders, 1 / nproc)
        shares.code = "sharded-twice"
        shares.problem = (
            f"the training data is sharded twice: the {nproc} processes drew {each} samples "
            f"from the training loader{which}, together 1/{nproc} of the original's "
            f"{shares.original} (a DistributedSampler, or a split by rank, and "
            "accelerator.prepare both shard it); leave the sharding to prepare"
        )
    return shares


def _loaders_off(drawn: dict[int, int], per_rank: list[dict[int, int]], factor: float) -> str:
    """' (loader 1)' naming which training loaders are off by `factor`, when they can be told."""
    off = [
        index
        for index, count in drawn.items()
        if count
        and all(index in ranks for ranks in per_rank)
        and _near(sum(ranks[index] for ranks in per_rank) / count, factor)
    ]
    if not off or len(drawn) == 1:
        return ""
    return f"{'s' if len(off) > 1 else ''} ({', '.join(f'loader {i}' for i in off)})"
