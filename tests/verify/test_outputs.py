"""Comparing what the main process shows with what the original showed."""

from __future__ import annotations

from migrator.verify.numbers import parse_line
from migrator.verify.outputs import Losses, compare_stream, duplicates

TOLERANCES = {"rtol": 1e-5, "atol": 1e-6}


def lines(*texts, step=0):
    return [parse_line(text, step) for text in texts]


def test_an_accuracy_n_times_too_high_is_a_difference_named_by_its_line():
    original = lines("epoch 0: test accuracy 0.703", "epoch 1: test accuracy 0.734")
    migrated = lines("epoch 0: test accuracy 0.703", "epoch 1: test accuracy 1.468")
    result = compare_stream("stdout", original, migrated, **TOLERANCES)
    assert result.compared == 4
    [difference] = result.differences
    assert difference.sentence() == (
        "epoch 1: test accuracy … — original 0.734, migrated 1.468 (stdout line 2)"
    )


def test_lines_the_migration_adds_do_not_shift_the_comparison():
    original = lines("epoch 0: loss 0.500", "epoch 1: loss 0.400")
    migrated = lines("Using 2 processes", "epoch 0: loss 0.500", "epoch 1: loss 0.400")
    result = compare_stream("stdout", original, migrated, **TOLERANCES)
    assert result.differences == [] and result.compared == 4 and result.missing == []


def test_lines_the_migrated_main_process_does_not_show_are_listed():
    original = lines("epoch 0: loss 0.5", "test accuracy 0.9")
    result = compare_stream("stdout", original, lines("epoch 0: loss 0.5"), **TOLERANCES)
    assert result.missing == ["test accuracy 0.9"] and result.differences == []


def test_a_value_each_process_prints_for_its_share_agrees_on_its_mean():
    original = lines("epoch 0: train accuracy 0.750")
    main = lines("epoch 0: train accuracy 0.700")
    would_print = [main, lines("epoch 0: train accuracy 0.800")]
    result = compare_stream(
        "stdout", original, main, would_print=would_print, losses=None, **TOLERANCES
    )
    assert result.differences == []
    assert "mean over the 2 processes, 0.75" in result.per_process[0]


def test_a_wrong_reduction_is_still_a_difference_on_every_process():
    original = lines("accuracy 0.75")
    main = lines("accuracy 1.50")
    result = compare_stream(
        "stdout", original, main, would_print=[main, lines("accuracy 1.50")], **TOLERANCES
    )
    assert len(result.differences) == 1


def test_the_main_processs_own_loss_over_the_last_steps_is_explained():
    losses = Losses(original=[1.0, 0.8, 0.6, 0.4], migrated=[1.1, 0.7, 0.3, 0.5])
    original = lines("step 4: running loss 0.500", step=4)  # the mean of its last 2 steps
    main = lines("step 4: running loss 0.400", step=4)  # the same of the main process's
    result = compare_stream("stdout", original, main, losses=losses, **TOLERANCES)
    assert result.differences == [] and "over its last 2 steps" in result.per_process[0]
    summed = compare_stream(
        "stdout",
        lines("loss sum 1.000", step=4),
        lines("loss sum 0.800", step=4),
        losses=losses,
        **TOLERANCES,
    )
    assert summed.differences == [] and "summed" in summed.per_process[0]


def test_a_number_that_is_no_window_of_the_losses_is_a_difference():
    losses = Losses(original=[1.0, 0.8, 0.6, 0.4], migrated=[1.1, 0.7, 0.3, 0.5])
    original = lines("step 4: running loss 0.450", step=4)
    main = lines("step 4: running loss 0.400", step=4)
    result = compare_stream("stdout", original, main, losses=losses, **TOLERANCES)
    assert len(result.differences) == 1
    shifted = compare_stream(
        "stdout",
        lines("loss 0.500", step=4),
        lines("loss 0.400", step=3),
        losses=losses,
        **TOLERANCES,
    )
    assert len(shifted.differences) == 1  # shown at another step: not the same window


def test_a_number_within_ten_times_the_rounding_probes_difference_is_rounding():
    original = lines("final loss 0.123456")
    probe = lines("final loss 0.123500")
    near = compare_stream(
        "stdout", original, lines("final loss 0.123700"), probe=probe, **TOLERANCES
    )
    far = compare_stream(
        "stdout", original, lines("final loss 0.133456"), probe=probe, **TOLERANCES
    )
    assert near.differences == [] and len(far.differences) == 1


def test_lines_of_other_processes_are_duplicates():
    found = duplicates([lines("a 1"), lines("a 1", "b 2"), []])
    assert found == {1: ["a 1", "b 2"]}
