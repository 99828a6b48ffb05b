"""Is the work shared: the samples drawn from training loaders, against the original's."""

from __future__ import annotations

from migrator.verify.records import RankRecord, RunRecord
from migrator.verify.shares import compare_shares


def run(*per_rank: dict[int, int], training: bool = True) -> RunRecord:
    ranks = []
    for rank, drawn in enumerate(per_rank):
        loaders = [{"index": i, "samples": n, "training": training} for i, n in drawn.items()]
        ranks.append(RankRecord(rank, "completed", [], [], 0, [], {"loaders": loaders}))
    return RunRecord(ranks)


def test_shares_that_add_up_to_the_originals_are_fine():
    shares = compare_shares(run({0: 480}), run({0: 240}, {0: 246}), 2)  # a padded last batch
    assert shares.problem is None and shares.migrated == 486


def test_every_process_drawing_everything_is_unsharded():
    shares = compare_shares(run({0: 480}), run({0: 480}, {0: 480}), 2)
    assert shares.code == "unsharded"
    assert "not shared" in shares.problem and "480, 480 samples" in shares.problem


def test_a_share_of_a_share_is_sharded_twice():
    shares = compare_shares(run({0: 480}), run({0: 120}, {0: 120}), 2)
    assert shares.code == "sharded-twice" and "1/2 of the original's 480" in shares.problem


def test_the_loader_off_is_named_among_several():
    shares = compare_shares(run({0: 100, 1: 100}), run({0: 50, 1: 100}, {0: 50, 1: 100}), 2)
    assert shares.problem is None  # 1.5x in all: neither N nor 1/N
    shares = compare_shares(run({0: 100, 1: 100}), run({0: 100, 1: 100}, {0: 100, 1: 100}), 2)
    assert "loaders (loader 0, loader 1)" in shares.problem


def test_nothing_is_judged_without_training_loaders_or_on_one_process():
    assert compare_shares(run({0: 64}, training=False), run({0: 64}, {0: 64}), 2) is None
    assert compare_shares(run({0: 64}), run({0: 64}), 1) is None
