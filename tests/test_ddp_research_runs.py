"""The migrated research-convention fixtures (fixtures/golden/ddp_research_*.out.py and the
ImageNet-style rank arithmetic) run under one `migrate launch --nproc 2`: a driver runs each in
turn in the same two processes (one process-group start for all), and what each prints shows
that the data was split between the processes and that only the main process saved."""

from __future__ import annotations

import pytest

from tests.golden_runs import launch_in_turn

pytestmark = pytest.mark.slow

FIXTURES = ["ddp_research_spawn_args", "ddp_rank_computed_by_hand", "ddp_research_batch_sampler"]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("research")
    return folder, launch_in_turn(folder, FIXTURES)


def test_spawned_worker_with_ranks_on_args_runs_sharded_on_two_processes(launched):
    folder, printed = launched
    text = printed["ddp_research_spawn_args"]
    # 256 samples, batch 16, 2 processes: 8 steps each, printed at steps 0 and 4 by rank 0 only
    assert text.count("(2 processes)") == 4, text
    assert "step 8" not in text and "epoch 1 step 4" in text
    assert text.count("validated 2 batches") == 2  # 64 samples: 2 batches per process, printed once
    assert (folder / "ddp_research_spawn_args" / "checkpoint.pth").exists()


def test_rank_arithmetic_fixture_runs_on_two_processes(launched):
    _, printed = launched
    assert printed["ddp_rank_computed_by_hand"].strip() == "ddp_rank_computed_by_hand"


def test_batch_sampler_fixture_runs_sharded_on_two_processes(launched):
    _, printed = launched
    text = printed["ddp_research_batch_sampler"]
    # 96 samples, batch 8, drop_last, 2 processes: 6 steps each (12 on one process); 40
    # validation samples: 3 batches each (the last one padded, gather_for_metrics trims it)
    assert "epoch 0 steps 6 val batches 3" in text and "epoch 1 steps 6 val batches 3" in text
    assert text.count("epoch") == 2, text  # printed by the main process only
