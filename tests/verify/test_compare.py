"""Comparison of recorded runs, on hand-made records (no subprocess, no torch)."""

from __future__ import annotations

import math
from array import array

from migrator.verify.compare import compare_runs, compare_weights
from migrator.verify.records import Parameter, RankRecord, RunRecord


def rank(losses, lrs=None, index=0) -> RankRecord:
    return RankRecord(
        rank=index,
        status="completed",
        step_losses=list(losses),
        step_lrs=list(lrs or [0.1] * len(losses)),
        backward_calls=len(losses),
        trailing_losses=[],
        observed={},
    )


def run(*per_rank_losses, weights=(1.0, 2.0), lrs=None) -> RunRecord:
    return RunRecord(
        ranks=[rank(losses, lrs, i) for i, losses in enumerate(per_rank_losses)],
        parameters=[Parameter("w", [len(weights)], array("d", weights))],
    )


def test_losses_within_tolerance_are_equivalent():
    result = compare_runs(run([1.0, 0.5]), run([1.0 + 1e-7, 0.5]), rtol=1e-5, atol=1e-6)
    assert result.equivalent
    assert result.divergence_step is None
    assert math.isclose(result.max_loss_diff, 1e-7, rel_tol=1e-3)


def test_first_step_out_of_tolerance_is_the_divergence_step():
    result = compare_runs(run([1.0, 0.5, 0.4]), run([1.0, 0.51, 0.6]), rtol=1e-5, atol=1e-6)
    assert not result.equivalent
    assert result.divergence_step == 2
    assert math.isclose(result.max_loss_diff, 0.2)


def test_migrated_loss_is_the_mean_over_ranks():
    result = compare_runs(run([1.0, 0.5]), run([0.9, 0.4], [1.1, 0.6]), rtol=1e-5, atol=1e-6)
    assert result.equivalent
    assert result.rows[0].per_rank == [0.9, 1.1]


def test_different_step_counts_diverge_after_the_shorter_run():
    result = compare_runs(run([1.0, 0.5, 0.4]), run([1.0, 0.5]), rtol=1e-5, atol=1e-6)
    assert not result.equivalent
    assert "3 optimizer steps" in result.step_count_problem
    assert result.divergence_step == 3


def test_equal_losses_but_different_final_weights_diverge_at_the_last_step():
    result = compare_runs(
        run([1.0, 0.5]), run([1.0, 0.5], weights=(1.0, 2.1)), rtol=1e-5, atol=1e-6
    )
    assert not result.equivalent
    assert result.divergence_step == 2
    assert result.weights.mismatched == ["w"]


def test_nan_loss_is_never_equivalent_to_a_number():
    result = compare_runs(run([1.0]), run([math.nan]), rtol=1e-5, atol=1e-6)
    assert result.divergence_step == 1


def test_learning_rate_divergence_is_reported_separately():
    result = compare_runs(
        run([1.0, 0.5], lrs=[0.1, 0.1]), run([1.0, 0.5], lrs=[0.1, 0.05]), rtol=1e-5, atol=1e-6
    )
    assert result.first_lr_divergence == 2


def test_weights_with_different_shapes_are_a_layout_problem():
    before = [Parameter("w", [2], array("d", [1.0, 2.0]))]
    after = [Parameter("w", [3], array("d", [1.0, 2.0, 3.0]))]
    assert compare_weights(before, after, rtol=1e-5, atol=1e-6).layout_problem


def test_weights_name_the_worst_tensor():
    before = [Parameter("a", [1], array("d", [1.0])), Parameter("b", [1], array("d", [1.0]))]
    after = [Parameter("a", [1], array("d", [1.0 + 1e-9])), Parameter("b", [1], array("d", [2.0]))]
    result = compare_weights(before, after, rtol=1e-5, atol=1e-6)
    assert result.worst == "b" and result.mismatched == ["b"]
    assert result.elements == 2
