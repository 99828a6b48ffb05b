"""Causes named from what the recorder observed (hand-made observations)."""

from __future__ import annotations

from migrator.verify.causes import batch_size_problems, find_causes, notes_when_equal


def loader(**facts) -> dict:
    base = {
        "index": 0,
        "batch_size": 16,
        "dataset_length": 128,
        "drop_last": False,
        "num_workers": 0,
        "shuffle": True,
        "seeded": False,
        "training": True,
        "random_draws_in_fetch": False,
        "prepared": False,
    }
    return {**base, **facts}


def observed(*loaders, dropout=0, batchnorm=0) -> dict:
    return {
        "dropout_calls": dropout,
        "batchnorm_training_calls": batchnorm,
        "loaders": list(loaders),
    }


def codes(causes) -> list[str]:
    return [cause.code for cause in causes]


def causes_for(original, nproc=2, no_dropout=False, runtime="runtime"):
    return find_causes(original, None, nproc=nproc, no_dropout=no_dropout, runtime=runtime)


def test_batch_size_not_dividing_by_nproc_is_named_with_both_numbers():
    problems = batch_size_problems(observed(loader(batch_size=9)), 2, training_only=True)
    assert len(problems) == 1
    assert "batch size 9" in problems[0] and "2 processes" in problems[0]


def test_eval_loaders_count_only_when_asked():
    facts = observed(loader(batch_size=9, training=False))
    assert batch_size_problems(facts, 2, training_only=True) == []
    assert batch_size_problems(facts, 2, training_only=False)


def test_dropout_is_a_cause_unless_turned_off():
    assert codes(causes_for(observed(loader(), dropout=3))) == ["dropout"]
    assert codes(causes_for(observed(loader(), dropout=3), no_dropout=True)) == []


def test_batchnorm_is_a_cause_only_with_several_processes():
    assert codes(causes_for(observed(loader(), batchnorm=5), nproc=2)) == ["batchnorm"]
    assert codes(causes_for(observed(loader(), batchnorm=5), nproc=1)) == []


def test_partial_last_batch_offers_max_steps_before_it():
    (cause,) = causes_for(observed(loader(dataset_length=70)))
    assert cause.code == "partial-batch"
    assert cause.first_step == 5
    assert "--max-steps 4" in cause.remedy


def test_drop_last_removes_the_partial_batch_cause():
    assert causes_for(observed(loader(dataset_length=70, drop_last=True))) == []


def test_random_draws_while_loading_and_workers_are_named():
    found = codes(causes_for(observed(loader(random_draws_in_fetch=True, num_workers=2))))
    assert found == ["augmentation", "workers"]


def test_unseeded_shuffle_is_a_cause_only_outside_our_runtime():
    assert codes(causes_for(observed(loader()), runtime="runtime")) == []
    assert codes(causes_for(observed(loader()), runtime="other")) == ["shuffle"]


def test_eval_loaders_are_not_causes():
    assert causes_for(observed(loader(dataset_length=70, training=False))) == []


def test_dropout_is_noted_even_when_runs_agree():
    notes = notes_when_equal(observed(loader(), dropout=2), nproc=1, no_dropout=False)
    assert any("dropout" in note for note in notes)


def test_random_draws_in_the_training_step_are_named_when_not_dropout():
    random_step = {**observed(loader()), "random_steps": 4}
    assert codes(causes_for(random_step)) == ["random-draws"]
    assert codes(causes_for({**random_step, "dropout_calls": 4})) == ["dropout"]


def test_learning_rate_divergence_names_the_scheduler_one_step_later():
    from migrator.verify.compare import Comparison, StepRow, WeightsComparison

    rows = [
        StepRow(1, 1.0, 1.0, [1.0], 0.1, 0.1),
        StepRow(2, 0.9, 0.9, [0.9], 0.1, 0.05),
        StepRow(3, 0.8, 0.85, [0.85], 0.1, 0.05),
    ]
    comparison = Comparison(rows, 3, 2, None, WeightsComparison(), 0.05)
    found = find_causes(
        observed(loader()), comparison, nproc=2, no_dropout=False, runtime="runtime"
    )
    assert found[0].code == "scheduler" and found[0].first_step == 3
    assert "step 2" in found[0].message


def test_backward_through_a_retained_graph_is_named_on_several_processes():
    twice = {**observed(loader()), "retained_graphs": 4}
    assert codes(causes_for(twice, nproc=2)) == ["repeated-backward"]
    assert codes(causes_for(twice, nproc=1)) == []


def test_autocast_is_named_as_mixed_precision():
    found = causes_for({**observed(loader()), "autocast": ["bfloat16"]})
    assert codes(found) == ["mixed-precision"] and "bfloat16" in found[0].message


def scaled_comparison(original_losses, migrated_losses):
    from migrator.verify.compare import compare_runs
    from tests.verify.test_compare import run

    return compare_runs(run(original_losses), run(migrated_losses), rtol=1e-5, atol=1e-6)


def test_a_loss_at_exactly_one_nth_from_step_one_is_named_a_summed_loss():
    comparison = scaled_comparison([40.0, 30.0, 20.0], [20.0, 15.000001, 10.0])
    (cause,) = find_causes(
        observed(loader()),
        comparison,
        nproc=2,
        no_dropout=False,
        runtime="runtime",
        summed_at=("line 7: mse_loss(reduction='sum')",),
    )
    assert cause.code == "summed-loss" and cause.first_step == 1
    assert "line 7: mse_loss(reduction='sum')" in cause.message
    assert "0.5 x the original at every one of the 3 steps" in cause.message
    assert "--nproc 1" in cause.remedy and "DDP averages the 2 sums" in cause.remedy


def test_a_summed_loss_drifting_after_step_one_is_still_named():
    # SGD: the smaller gradient changes training, so only step 1 is an exact 1/N
    comparison = scaled_comparison([40.0, 30.0, 20.0], [10.0, 9.0, 8.0])
    cause = find_causes(observed(loader()), comparison, nproc=4, no_dropout=False, runtime="x")[0]
    assert cause.code == "summed-loss"
    assert "0.25 x the original at step 1" in cause.message and "drifts apart" in cause.message
    assert "does not show" in cause.message  # no source evidence given


def test_another_constant_factor_is_a_loss_scale():
    comparison = scaled_comparison([1.0, 0.8, 0.6], [2.0, 1.6, 1.2])
    cause = find_causes(observed(loader()), comparison, nproc=2, no_dropout=False, runtime="x")[0]
    assert cause.code == "loss-scale" and "2 x the original" in cause.message


def test_a_ratio_that_is_no_scale_names_no_loss_cause():
    comparison = scaled_comparison([1.0, 0.8, 0.6], [1.0131, 0.7, 0.65])
    found = find_causes(observed(loader()), comparison, nproc=2, no_dropout=False, runtime="x")
    assert "summed-loss" not in codes(found) and "loss-scale" not in codes(found)


def test_a_sum_in_the_source_is_named_when_step_one_diverges_for_another_reason_too():
    comparison = scaled_comparison([40.0, 30.0], [20.3, 14.0])  # sum and random draws
    random_step = {**observed(loader()), "random_steps": 2}
    found = find_causes(
        random_step,
        comparison,
        nproc=2,
        no_dropout=False,
        runtime="runtime",
        summed_at=("line 9: KLD = ... sum(...)",),
    )
    assert codes(found) == ["summed-loss", "random-draws"]
    assert "0.5075 x the original at step 1, not exactly 1/2" in found[0].message


def test_a_sum_in_the_source_is_not_blamed_for_a_later_divergence():
    comparison = scaled_comparison([4.0, 3.0, 2.0], [4.0, 3.0, 2.5])
    found = find_causes(
        observed(loader()),
        comparison,
        nproc=2,
        no_dropout=False,
        runtime="runtime",
        summed_at=("line 9: x(reduction='sum')",),
    )
    assert "summed-loss" not in codes(found)


def test_a_sum_in_the_source_is_not_blamed_when_the_losses_are_not_near_one_nth():
    # dropout makes step 1 differ, but the migrated loss is nowhere near half the original
    comparison = scaled_comparison([2.3035, 2.7], [2.3037, 2.45])
    found = find_causes(
        observed(loader(), dropout=4),
        comparison,
        nproc=2,
        no_dropout=False,
        runtime="runtime",
        summed_at=("line 61: nll_loss(reduction='sum')",),
    )
    assert codes(found) == ["dropout"]
