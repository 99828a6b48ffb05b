"""Real divergences still say DIVERGED under the weight rule, and a loss summed over the batch
is named: fixtures/scripts/faulty_migration.py turns one fault on in the launched run only."""

from __future__ import annotations

import pytest

from tests.verify.conftest import needs_runtime, verify_json

pytestmark = [needs_runtime, pytest.mark.slow]

FAULTY = "faulty_migration.py"


def fault_run(fault: str, *options: str) -> tuple[dict, object]:
    return verify_json(FAULTY, "--nproc", "2", *options, script_args=("--fault", fault))


def test_the_faulty_script_without_a_fault_is_equivalent():
    report, result = fault_run("none")
    assert report["verdict"] == "EQUIVALENT", result.stdout + result.stderr
    assert len(report["steps"]) == 8


@pytest.mark.parametrize(
    ("fault", "options", "step", "cause"),
    [
        ("loss-x2", (), 1, "loss-scale"),  # the loss series: Adam's updates hide a scale
        ("skip-step", (), 3, "steps"),
        ("extra-step", (), 4, "steps"),  # the extra step had no backward: loss 0
        ("accumulation", (), 1, "steps"),  # a window of 3 batches instead of 2
    ],
)
def test_a_wrong_loss_or_step_count_diverges_and_is_named(fault, options, step, cause):
    report, result = fault_run(fault, *options)
    assert result.returncode == 1, result.stdout + result.stderr
    assert report["verdict"] == "DIVERGED"
    assert report["step"] == step
    assert report["causes"][0]["code"] == cause


def test_half_the_loss_looks_like_a_sum_but_the_source_shows_none():
    report, result = fault_run("loss-half")
    assert result.returncode == 1
    cause = report["causes"][0]
    assert cause["code"] == "summed-loss"
    assert "does not show" in cause["message"] and "scaled it by 1/2" in cause["message"]


def test_a_per_epoch_scheduler_stepped_per_step_diverges_on_the_learning_rate_alone():
    # two steps: both losses agree (each is computed before its update); the rate does not
    report, result = fault_run("epoch-scheduler", "--max-steps", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert [row["abs_diff"] < 1e-6 for row in report["steps"]] == [True, True]
    assert report["step"] == 2 and "learning rate differs from step 2" in report["reason"]
    assert report["causes"][0]["code"] == "scheduler"


def test_a_dropped_zero_grad_diverges_on_the_final_weights_alone():
    # step 2 adds step 1's gradient to its own; no recorded loss comes after that update
    report, result = fault_run("no-zero-grad", "--max-steps", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert [row["abs_diff"] < 1e-6 for row in report["steps"]] == [True, True]
    assert "final weights differ" in report["reason"]
    weights = report["weights"]
    assert weights["max_drift"] > 100 * weights["drift_tolerance"]
    assert len(weights["mismatched"]) == 4
    # no cause is named, so the rounding probe ran: one-ulp moves leave the weights far closer
    assert report["probe"]["explained"] is False
    assert any("differs from itself far less" in note for note in report["notes"])


def test_a_training_that_amplifies_rounding_is_equal_up_to_rounding():
    report, result = verify_json("unstable_sgd.py", "--nproc", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert report["verdict"] == "EQUIVALENT"
    first_out = next(row["step"] for row in report["steps"] if row["abs_diff"] > 1e-5 * 0.5)
    assert first_out > 20  # the runs agree to rounding first, then the gap grows
    probe = report["probe"]
    assert probe["explained"] and probe["departs_at"] is not None and probe["ratio"] < 10
    assert "equal up to rounding" in report["reason"]
    assert any("amplifies rounding" in note and "--max-steps" in note for note in report["notes"])


def test_a_loss_summed_over_the_batch_is_named_from_the_losses_and_the_source():
    report, result = verify_json("summed_loss_autoencoder.py", "--nproc", "2", "--max-steps", "4")
    assert result.returncode == 1
    assert report["verdict"] == "DIVERGED" and report["step"] == 1
    cause = report["causes"][0]
    assert cause["code"] == "summed-loss"
    assert "line 36: binary_cross_entropy(reduction='sum')" in cause["message"]
    assert "0.5 x the original at every one of the 4 steps" in cause["message"]
    assert "--nproc 1" in cause["remedy"] and "split_batches=False" in cause["remedy"]
    for row in report["steps"]:
        assert row["migrated"] / row["original"] == pytest.approx(0.5, rel=1e-3)


def test_the_summed_loss_compares_equal_on_one_process():
    report, result = verify_json("summed_loss_autoencoder.py", "--nproc", "1", "--max-steps", "4")
    assert report["verdict"] == "EQUIVALENT", result.stdout + result.stderr
