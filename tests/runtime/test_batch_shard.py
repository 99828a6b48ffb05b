"""Loader sharding, unit level: what each of 2 ranks gets from an original batch sampler."""

import pytest
from torch.utils.data import BatchSampler, SequentialSampler

from runtime.sampling import BatchShard


def shards(length, batch_size, *, split, even=True, drop_last=False, processes=2):
    original = BatchSampler(SequentialSampler(range(length)), batch_size, drop_last)
    made = [
        BatchShard(
            original,
            num_processes=processes,
            process_index=rank,
            split_batches=split,
            even_batches=even,
            batch_size=batch_size,
        )
        for rank in range(processes)
    ]
    return [list(shard) for shard in made], [len(shard) for shard in made]


def test_unsplit_deals_whole_batches_round_robin():
    (rank0, rank1), lengths = shards(64, 16, split=False)
    assert rank0 == [list(range(16)), list(range(32, 48))]
    assert rank1 == [list(range(16, 32)), list(range(48, 64))]
    assert lengths == [2, 2]


def test_split_slices_every_batch_and_keeps_the_length():
    (rank0, rank1), lengths = shards(64, 16, split=True)
    assert rank0[0] == list(range(8)) and rank1[0] == list(range(8, 16))
    assert len(rank0) == len(rank1) == 4
    assert lengths == [4, 4]


def test_unsplit_even_tail_of_70_pads_from_the_epoch_start():
    (rank0, rank1), lengths = shards(70, 16, split=False)
    assert lengths == [3, 3]  # ceil(5 / 2), as in HF Accelerate
    assert rank0[-1] == list(range(64, 70)) + list(range(10))
    assert rank1[-1] == list(range(10, 26))
    assert all(len(batch) == 16 for batch in rank0 + rank1)


def test_unsplit_uneven_tail_leaves_the_short_rank_without_a_batch():
    (rank0, rank1), lengths = shards(70, 16, split=False, even=False)
    assert rank0[-1] == list(range(64, 70))
    assert len(rank0) == 3 and len(rank1) == 2
    assert lengths == [3, 2]


def test_unsplit_partial_last_batch_in_a_full_group_is_topped_up():
    (rank0, rank1), lengths = shards(54, 16, split=False)  # batches 16, 16, 16, 6
    assert rank1[-1] == list(range(48, 54)) + list(range(10))
    assert lengths == [2, 2] and [len(rank0), len(rank1)] == [2, 2]


def test_split_even_tail_pads_the_last_batch_before_slicing():
    (rank0, rank1), lengths = shards(70, 16, split=True)
    assert rank0[-1] == [64, 65, 66, 67, 68, 69, 0, 1]
    assert rank1[-1] == [2, 3, 4, 5, 6, 7, 8, 9]
    assert lengths == [5, 5]


def test_split_uneven_tail_gives_each_rank_only_real_samples():
    (rank0, rank1), lengths = shards(70, 16, split=True, even=False)
    assert rank0[-1] == [64, 65, 66, 67, 68, 69]
    assert len(rank1) == 4 and rank1[-1] == list(range(56, 64))
    assert lengths == [5, 4]


def test_drop_last_drops_an_incomplete_group():
    (rank0, rank1), lengths = shards(90, 16, split=False, drop_last=True)  # 5 full batches
    assert len(rank0) == len(rank1) == 2
    assert lengths == [2, 2]


@pytest.mark.parametrize("split", [False, True])
def test_ranks_together_cover_the_original_order(split):
    (rank0, rank1), _ = shards(64, 16, split=split)
    if split:
        merged = [a + b for a, b in zip(rank0, rank1)]
    else:
        merged = [batch for pair in zip(rank0, rank1) for batch in pair]
    assert [i for batch in merged for i in batch] == list(range(64))


def test_split_rejects_a_batch_size_that_does_not_divide():
    with pytest.raises(ValueError, match="divisible"):
        shards(70, 15, split=True)


def test_one_process_is_the_identity_even_with_a_partial_tail():
    (only,), lengths = shards(70, 16, split=False, processes=1)
    assert only[-1] == list(range(64, 70))
    assert lengths == [5]


def test_skipping_drops_this_ranks_first_batches_every_epoch():
    original = BatchSampler(SequentialSampler(range(64)), 16, False)
    shard = BatchShard(
        original,
        num_processes=2,
        process_index=1,
        split_batches=False,
        even_batches=True,
        batch_size=16,
    ).skipping(1)
    assert list(shard) == [list(range(48, 64))]
    assert list(shard) == [list(range(48, 64))]  # as HF's SkipBatchSampler: each iteration
    assert len(shard) == 1
