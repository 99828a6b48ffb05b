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


def tensor(values, initial=None, name="w") -> list[Parameter]:
    start = array("d", initial) if initial is not None else None
    return [Parameter(name, [len(values)], array("d", values), start)]


# a tensor of 1000 values that training moved by 10 steps of 1e-3 per element (Adam-like)
INITIAL = [0.01 * (i % 7) for i in range(1000)]
TRAINED = [w - 10 * 1e-3 * (1 if i % 3 else -1) for i, w in enumerate(INITIAL)]


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


def test_rounding_on_a_few_elements_is_within_what_training_moved():
    # the Adam MLP: a few elements with near-zero gradients end ~1e-6 apart
    migrated = list(TRAINED)
    migrated[5] += 8.8e-6
    migrated[17] -= 1.3e-6
    result = compare_weights(
        tensor(TRAINED, INITIAL), tensor(migrated, INITIAL), rtol=1e-5, atol=1e-6
    )
    assert result.mismatched == []
    assert result.max_abs_diff > 1e-6  # out of the elementwise tolerance, within the drift one
    assert 0 < result.max_drift < result.drift_tolerance == 1e-4


def test_one_update_more_or_less_is_out_of_tolerance():
    # the last of 10 updates missing on every element: 1/10 of what training moved
    migrated = [w + 1e-3 * (1 if i % 3 else -1) for i, w in enumerate(TRAINED)]
    result = compare_weights(
        tensor(TRAINED, INITIAL), tensor(migrated, INITIAL), rtol=1e-5, atol=1e-6
    )
    assert result.mismatched == ["w"]
    assert abs(result.max_drift - 0.1) < 1e-6


def test_the_drift_tolerance_follows_rtol():
    migrated = [w + 5e-5 for w in TRAINED]  # 5e-3 of what training moved
    original = tensor(TRAINED, INITIAL)
    assert compare_weights(original, tensor(migrated, INITIAL), rtol=1e-5, atol=1e-6).mismatched
    loose = compare_weights(original, tensor(migrated, INITIAL), rtol=1e-3, atol=1e-6)
    assert loose.mismatched == [] and loose.drift_tolerance == 1e-2
    # elementwise, rtol 1e-3 alone would not have let it through
    elementwise = compare_weights(tensor(TRAINED), tensor(migrated), rtol=1e-3, atol=1e-6)
    assert elementwise.mismatched == ["w"]


def test_without_initial_weights_every_element_must_be_close():
    migrated = list(TRAINED)
    migrated[5] += 8.8e-6
    result = compare_weights(tensor(TRAINED), tensor(migrated), rtol=1e-5, atol=1e-6)
    assert result.mismatched == ["w"] and result.max_drift is None


def test_a_tensor_training_did_not_move_must_match_elementwise():
    frozen = [0.5] * 4
    moved = [0.5, 0.5, 0.5, 0.5 + 1e-4]
    result = compare_weights(tensor(frozen, frozen), tensor(moved, frozen), rtol=1e-5, atol=1e-6)
    assert result.mismatched == ["w"] and result.max_drift == math.inf


def test_runs_that_started_from_different_weights_diverge():
    other_start = [w + 0.1 for w in INITIAL]
    result = compare_weights(
        tensor(TRAINED, INITIAL), tensor(TRAINED, other_start), rtol=1e-5, atol=1e-6
    )
    assert result.started_apart == ["w"] and result.mismatched == ["w"]


def test_unknown_initial_values_fall_back_to_the_elementwise_rule():
    unknown = [math.nan] * len(INITIAL)
    migrated = list(TRAINED)
    migrated[5] += 8.8e-6
    result = compare_weights(
        tensor(TRAINED, unknown), tensor(migrated, unknown), rtol=1e-5, atol=1e-6
    )
    assert result.started_apart == [] and result.mismatched == ["w"]


def test_a_learning_rate_differing_only_at_the_last_step_is_a_divergence():
    # the losses are computed before each update: the last step's rate shows in no loss
    result = compare_runs(
        run([1.0, 0.5], lrs=[0.1, 0.1]), run([1.0, 0.5], lrs=[0.1, 0.01]), rtol=1e-5, atol=1e-6
    )
    assert not result.equivalent
    assert result.first_loss_divergence is None and result.divergence_step == 2
