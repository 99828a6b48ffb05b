"""The migrated loader-flow fixtures (evaluation loaders, loaders in containers) run in turn
under one `migrate launch --nproc 2`: every loader the program iterates and the migration
prepares gives each process its share (half the batches), the gathered metrics count the
whole set, and the loaders left plain (with a note) give each process the whole set."""

from __future__ import annotations

import re

import pytest

from tests.golden_runs import launch_in_turn

pytestmark = pytest.mark.slow

FIXTURES = [
    "eval_loader_returned_by_helper",
    "eval_loader_made_in_evaluate",
    "eval_loader_left_plain",
    "eval_loader_kept_plain_for_its_metric",
    "loaders_dict_by_phase",
    "loaders_dict_comprehension",
    "loaders_dict_from_helper",
    "loaders_taken_in_turn",
    "tensors_by_phase_loaderless",
]


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    return launch_in_turn(tmp_path_factory.mktemp("loader_flows"), FIXTURES)


def test_a_test_loader_returned_by_a_helper_is_sharded_and_its_metric_gathered(printed):
    out = printed["eval_loader_returned_by_helper"]
    # 32 test samples, batch 8: 4 batches, 2 on each process; the gathered count is 32
    assert out.count("test batches 2 samples 32") == 3, out
    assert len(re.findall(r"^epoch \d accuracy ", out, re.MULTILINE)) == 3, out


def test_a_loader_made_in_an_evaluation_function_run_every_epoch_stays_whole(printed):
    out = printed["eval_loader_made_in_evaluate"]
    # 16 validation samples, batch 4: not prepared per call, so 4 batches on each process
    assert len(re.findall(r"valid batches 4 samples 16 error", out)) == 3, out


def test_loaders_left_plain_give_each_process_the_whole_set(printed):
    out = printed["eval_loader_left_plain"]
    # the loop-head loader and the helper's `loader` stay plain: 16 samples on each process,
    # 10 right at most; the flagged test loader is prepared: 4 batches, 2 on each process
    found = re.findall(r"^epoch \d checked (\d+) right (\d+)$", out, re.MULTILINE)
    assert [checked for checked, _ in found] == ["16", "16"], out
    assert all(int(right) <= 16 for _, right in found), out
    assert "test batches 2" in out, out


def test_a_loader_whose_metric_cannot_be_gathered_alike_stays_whole(printed):
    out = printed["eval_loader_kept_plain_for_its_metric"]
    # the validation loader stays plain: each process evaluates all 16 samples, so the
    # best-model decision is the same on both
    assert out.count("evaluated 16") == 3, out


def test_loaders_in_a_dict_by_phase_are_both_sharded(printed):
    out = printed["loaders_dict_by_phase"]
    # train: 32 samples, batch 4, drop_last: 8 steps, 4 each; valid: 16 samples, 2 each
    assert out.count("train steps 4 of 16 valid") == 2, out
    assert out.count("valid steps 2 of 16 valid") == 2, out


def test_loaders_made_in_a_dict_comprehension_are_prepared_in_place(printed):
    out = printed["loaders_dict_comprehension"]
    assert out.count("train batches 6 of 48 samples") == 2, out
    assert out.count("val batches 2 of 16 samples") == 2, out


def test_loaders_in_a_dict_a_helper_returns_are_prepared_in_it(printed):
    out = printed["loaders_dict_from_helper"]
    # 8 test samples, batch 4: one batch on each process
    assert out.count("test batches 1") == 3, out


def test_a_loop_variable_over_a_dict_of_loaders_draws_shards(printed):
    out = printed["loaders_taken_in_turn"]
    assert out.count("train batches 4") == 2 and out.count("val batches 2") == 2, out


def test_batches_the_script_makes_itself_train_on_every_process(printed):
    out = printed["tensors_by_phase_loaderless"]
    assert len(re.findall(r"^epoch \d (train|valid) ", out, re.MULTILINE)) == 4, out
