"""The API on 2 gloo processes launched by `migrate launch --nproc 2` (one launch, many checks)."""

import pytest
from conftest import check, read_json, run_migrate_launch, run_python

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def launched(session_tmp):
    out = session_tmp / "features"
    done = check(run_migrate_launch("features.py", str(out)))
    check(run_python("features.py", str(out), "--reference"))
    ranks = [read_json(out / f"rank{rank}.json") for rank in (0, 1)]
    return done, ranks, read_json(out / "reference.json")


def interleave(rank0, rank1, size):
    """The global order from two ranks' unsplit shares of `size`-sample batches."""
    chunks0 = [rank0[i : i + size] for i in range(0, len(rank0), size)]
    chunks1 = [rank1[i : i + size] for i in range(0, len(rank1), size)]
    return [i for pair in zip(chunks0, chunks1) for chunk in pair for i in chunk]


def test_rank_facts(launched):
    _, ranks, _ = launched
    assert [r["num_processes"] for r in ranks] == [2, 2]
    assert [r["process_index"] for r in ranks] == [0, 1]
    assert [r["local_process_index"] for r in ranks] == [0, 1]
    assert [r["is_main_process"] for r in ranks] == [True, False]
    assert ranks[0]["device"] == "cpu"


def test_prepare_keeps_order_and_types(launched):
    _, ranks, _ = launched
    for facts in ranks:
        assert facts["prepared_types"] == [
            "DistributedDataParallel",
            "PreparedOptimizer",
            "dict",
            "PreparedDataLoader",
            "PreparedScheduler",
        ]
        assert facts["passthrough_kept"] and facts["reprepare_is_identity"]
        assert facts["unwrapped_is_original"] and facts["ddp_weights_equal_rank0"]


@pytest.mark.parametrize(
    "config, lengths, sizes0, sizes1",
    [
        ("split=False,even=True,n=64", [2, 2], [16, 16], [16, 16]),
        ("split=False,even=True,n=70", [3, 3], [16, 16, 16], [16, 16, 16]),
        ("split=False,even=False,n=70", [3, 2], [16, 16, 6], [16, 16]),
        ("split=True,even=True,n=64", [4, 4], [8] * 4, [8] * 4),
        ("split=True,even=True,n=70", [5, 5], [8] * 5, [8] * 5),
        ("split=True,even=False,n=70", [5, 4], [8, 8, 8, 8, 6], [8] * 4),
    ],
)
def test_loader_sharding_and_lengths(launched, config, lengths, sizes0, sizes1):
    _, ranks, _ = launched
    shards = [facts["loaders"][config] for facts in ranks]
    assert [shard["len"] for shard in shards] == lengths
    assert [len(b) for b in shards[0]["batches"]] == sizes0
    assert [len(b) for b in shards[1]["batches"]] == sizes1


@pytest.mark.parametrize("config", ["split=False,even=True,n=64", "split=True,even=True,n=64"])
def test_ranks_together_see_every_sample_once(launched, config):
    _, ranks, _ = launched
    seen = [i for facts in ranks for batch in facts["loaders"][config]["batches"] for i in batch]
    assert sorted(seen) == list(range(64))


def test_unseeded_shuffle_matches_the_unmigrated_order_every_epoch(launched):
    _, (rank0, rank1), reference = launched
    for epoch in range(2):
        merged = interleave(rank0["order_global_seed"][epoch], rank1["order_global_seed"][epoch], 8)
        assert merged == reference["order"][epoch]


def test_device_specific_seeds_still_give_one_global_order(launched):
    _, (rank0, rank1), reference = launched
    merged = interleave(rank0["order_device_seed"][0], rank1["order_device_seed"][0], 8)
    assert merged == reference["order"][0]
    assert rank1["own_rng_moved_only_by_base_seed"]


def test_explicit_generators_follow_rank_zero(launched):
    _, (rank0, rank1), reference = launched
    merged = interleave(rank0["order_generator"][0], rank1["order_generator"][0], 8)
    assert merged == reference["order_generator"][0]


@pytest.mark.parametrize("split", [False, True])
def test_gather_for_metrics_returns_exactly_70(launched, split):
    _, ranks, _ = launched
    for facts in ranks:
        assert facts[f"gather_for_metrics_split={split}"] == list(range(70))
        assert facts[f"gather_objects_split={split}"] == sorted(f"s{i}" for i in range(70))
        assert facts[f"gather_arrays_split={split}"] == list(range(70))
        assert facts[f"gather_tuples_split={split}"] == sorted(f"t{i}" for i in range(70))
    assert ranks[0][f"gather_count_split={split}"] == (96 if not split else 80)


def test_reduce_pad_and_scalar_gather(launched):
    _, ranks, _ = launched
    for facts in ranks:
        assert facts["reduce_sum"] == [3.0] and facts["reduce_mean"] == [1.5]
        assert facts["padded_gather"] == [[1, 1], [-1, -1], [2, 2], [2, 2]]
        assert facts["scalar_gather"] == [0.0, 1.0]


def test_print_is_one_line_from_the_main_process(launched):
    done, _, _ = launched
    assert done.stdout.count("PRINTED-ONCE") == 1


def test_main_process_first_and_save_on_main(launched):
    _, ranks, _ = launched
    assert all(facts["saw_main_first"] for facts in ranks)
    assert all(facts["saved_by"] == 0 for facts in ranks)


def test_join_uneven_inputs_lets_ranks_with_fewer_batches_finish(launched):
    _, ranks, _ = launched
    assert [facts["joined_steps"] for facts in ranks] == [3, 2]
    assert all(facts["joined_weights_equal"] for facts in ranks)
