"""The rounding probe's judgement, on hand-made records (no subprocess, no torch)."""

from __future__ import annotations

from array import array

from migrator.verify.compare import compare_runs
from migrator.verify.probe import judge, may_explain, rounding_reason
from migrator.verify.records import Parameter, RankRecord, RunRecord

STEPS = 30


def record(losses, weights=(1.0, 2.0), initial=(0.0, 0.0)) -> RunRecord:
    rank = RankRecord(0, "completed", list(losses), [0.1] * len(losses), len(losses), [], {})
    parameter = Parameter("w", [len(weights)], array("d", weights), array("d", initial))
    return RunRecord(ranks=[rank], parameters=[parameter])


def growing(scale: float, start: int = 10) -> list[float]:
    """Losses off the original's by `scale` * 1e-7, doubling every 2 steps from `start`."""
    return [
        1.0 + (scale * 1e-7 * 2 ** ((step - start) / 2) if step >= start else 0.0)
        for step in range(STEPS)
    ]


ORIGINAL = [1.0] * STEPS


def judged(migrated_losses, probe_losses, migrated_weights=(1.0, 2.0), probe_weights=(1.0, 2.0)):
    original = record(ORIGINAL)
    migrated = record(migrated_losses, migrated_weights)
    comparison = compare_runs(original, migrated, rtol=1e-5, atol=1e-6)
    probe = record(probe_losses, probe_weights)
    return comparison, judge(original, probe, comparison, rtol=1e-5, atol=1e-6)


def test_differences_growing_like_the_probes_are_rounding():
    comparison, result = judged(growing(1.5), growing(1.0))
    assert not comparison.equivalent and may_explain(comparison)
    assert result.explained and 1.0 < result.ratio < 2.0
    assert result.departs_at is not None


def test_a_difference_that_starts_while_the_probe_is_at_rounding_level_is_not():
    fault = [1.0] * 3 + [1.001] * (STEPS - 3)  # a real change from step 4
    _, result = judged(fault, growing(1.0))
    assert not result.explained and result.unexplained_step == 4


def test_a_fault_is_not_averaged_away_by_later_chaos():
    # the probe's late differences are large, but at step 4 the migrated run alone differs
    fault = [1.0] * 3 + [1.0001] * 10 + growing(1e4)[13:]
    _, result = judged(fault, growing(1e3))
    assert result.ratio < 10  # over all steps at once it would pass
    assert not result.explained and result.unexplained_step == 4


def test_a_probe_that_never_moves_explains_nothing():
    _, result = judged(growing(1.0), ORIGINAL)
    assert not result.explained and result.departs_at is None


def test_one_loss_out_of_tolerance_alone_is_a_forward_pass_rounding_if_the_probe_moved():
    blip = list(growing(1.0, start=12))
    blip[6] += 1e-4  # step 7 alone, 180x the probe there; step 8 agrees again
    _, result = judged(blip, growing(1.0, start=4))
    assert result.explained and result.unexplained_step is None
    _, quiet = judged(blip, ORIGINAL)  # a probe that never moved explains nothing
    assert not quiet.explained and quiet.ratio == float("inf")


def test_a_loss_spike_alone_beyond_the_probe_is_a_blip_not_a_divergence():
    # a real LSTM tutorial: step 7's loss jumps (a spike) and alone leaves the tolerance at
    # 18x the probe there; steps 8 on agree again, so the weights took the same step
    probe = list(ORIGINAL)
    probe[6] = 1.0 + 2e-6
    spike = list(ORIGINAL)
    spike[6] = 1.0 + 3.6e-5
    comparison, result = judged(spike, probe)
    assert result.explained and result.blips == [7] and result.only_blips
    assert 17 < result.ratio < 19  # reported over every out-of-tolerance step
    reason, note = rounding_reason(comparison, result)
    assert "only the loss of step 7 " in reason and "is out of tolerance" in reason
    assert "18x less" in note
    # the same difference lasting two steps is not a blip: 18x the probe is a real change
    spike[7] = 1.0 + 3.6e-5
    _, lasting = judged(spike, probe)
    assert not lasting.explained and lasting.blips == [8]
    # and a blip far beyond the probe (here 1800x) stays in the ratio
    spike = list(ORIGINAL)
    spike[6] = 1.0 + 3.6e-3
    _, far = judged(spike, probe)
    assert not far.explained and far.blips == []


def test_final_weights_apart_no_more_than_the_probes_are_rounding():
    _, result = judged(ORIGINAL, ORIGINAL, (1.0, 2.0 + 3e-4), (1.0, 2.0 + 1e-4))
    assert result.explained and abs(result.ratio - 3.0) < 1e-6
    _, result = judged(ORIGINAL, ORIGINAL, (1.0, 2.0 + 3e-2), (1.0, 2.0 + 1e-4))
    assert not result.explained and result.unexplained_step == STEPS


def test_the_probe_is_not_asked_about_differences_rounding_cannot_make():
    step_one = compare_runs(record(ORIGINAL), record([1.1] + ORIGINAL[1:]), rtol=1e-5, atol=1e-6)
    assert not may_explain(step_one)  # same weights, same batch: nothing to amplify yet
    fewer = compare_runs(record(ORIGINAL), record(ORIGINAL[:-1]), rtol=1e-5, atol=1e-6)
    assert not may_explain(fewer)
