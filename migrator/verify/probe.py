"""The rounding probe: does this training turn rounding differences into the divergence seen?

A 1-process and an N-process run sum gradients and compute each slice's forward pass in other
orders, so their values differ in the last bits; some trainings (a high learning rate, long
recurrences, a loss spike, Adam on near-zero gradients) grow such differences past any fixed
tolerance. When runs diverge with no cause named, verify runs the original a second time with
rounding-sized changes at every optimizer step (each gradient element moved by a few rounding
units of its size, every parameter by one: `Recorder.nudge_gradients`, `nudge_parameters`) and
compares it with the first: the probe's differences are what rounding alone does here. The
migrated run's divergence is explained by rounding when, at every step where its loss is out
of tolerance, its difference stays within PROBE_FACTOR times the probe's (around that step);
when every loss agrees and only the final weights do not, their drift must stay within
PROBE_FACTOR times the probe's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from migrator.verify.compare import Comparison, close, compare_weights
from migrator.verify.records import RunRecord

PROBE_FACTOR = 10  # measured: exact migrations 0.07x to 5.3x the probe, faults 1e5x
STEP_FACTOR = 100  # and no single step beyond this: a fault starting while the probe is quiet
WINDOW = 2  # steps either side: chaotic differences rise and fall from one step to the next


@dataclass
class ProbeResult:
    departs_at: int | None  # first step where the probe's loss is out of tolerance
    explained: bool  # the migrated run's differences are rounding-sized
    unexplained_step: int | None  # when not: the first step beyond the probe's
    ratio: float  # migrated / probe differences: root mean square over out-of-tolerance steps
    drift: float | None  # the probe's final weights, apart by this much of training's change
    blips: list[int] = field(default_factory=list)  # steps whose loss alone was out, next agreeing
    only_blips: bool = False  # every loss out of tolerance is a blip

    def as_dict(self) -> dict:
        return {
            "departs_at": self.departs_at,
            "explained": self.explained,
            "unexplained_step": self.unexplained_step,
            "ratio": self.ratio if math.isfinite(self.ratio) else None,
            "drift": self.drift,
            "blips": self.blips,
        }


def judge(
    original: RunRecord, probe: RunRecord, comparison: Comparison, *, rtol: float, atol: float
) -> ProbeResult:
    """Compares the migrated run's differences with the probe's.

    Chaotic differences rise and fall from step to step, so each out-of-tolerance step of the
    migrated run is set against the largest probe difference within WINDOW steps of it, and
    the ratio is taken over all of them at once (root mean square): rounding gives ~0.1-5, a
    migration fault orders of magnitude more. No single step may exceed STEP_FACTOR times the
    probe either (a fault that starts while the probe is still at 1e-7 is not averaged away
    by later steps where both runs are chaotic), unless the next step agrees again. A loss
    out of tolerance alone (the next step
    agrees again) within STEP_FACTOR of the probe is a blip and is left out of the ratio: the
    weights did not take another step, that forward pass rounded otherwise (the launched run
    computes each batch slice in other block sizes, which the probe's nudges do not imitate;
    at a loss spike that can exceed PROBE_FACTOR).
    """
    first, second = original.mean_losses(), probe.mean_losses()
    probe_diffs = [abs(b - a) for a, b in zip(first, second)]
    departs_at = next(
        (i + 1 for i, (a, b) in enumerate(zip(first, second)) if not close(a, b, rtol, atol)),
        None,
    )
    migrated_sq, probe_sq, far, first_out = 0.0, 0.0, None, None
    lasting_sq, lasting_probe_sq = 0.0, 0.0  # the same, without one-step forward-pass blips
    blips: list[int] = []
    lasting_steps = 0
    for index, row in enumerate(comparison.rows):
        if row.abs_diff is None or close(row.original, row.migrated, rtol, atol):
            continue
        first_out = first_out or row.step
        envelope = max(probe_diffs[max(0, index - WINDOW) : index + WINDOW + 1], default=0.0)
        migrated_sq += row.abs_diff**2
        probe_sq += envelope**2
        within_reach = row.abs_diff <= STEP_FACTOR * envelope  # False for NaN
        alone = transient(comparison, index, rtol, atol)  # back within tolerance next step
        if alone and within_reach:
            blips.append(row.step)  # a forward pass's rounding: not in the ratio
            continue
        lasting_steps += 1
        lasting_sq += row.abs_diff**2
        lasting_probe_sq += envelope**2
        if far is None and not within_reach and not alone:
            far = row.step
    ratio = _ratio(migrated_sq, probe_sq)
    explained = far is None and _ratio(lasting_sq, lasting_probe_sq) <= PROBE_FACTOR
    weights = compare_weights(original.parameters, probe.parameters, rtol=rtol, atol=atol)
    drift = weights.max_drift
    migrated = comparison.weights
    # once losses part, the final weights part with them (already judged on the losses);
    # with every loss equal, the weights are all there is to judge
    if explained and migrated.mismatched and first_out is None:
        explained = (
            drift is not None
            and migrated.max_drift is not None
            and not migrated.started_apart
            and migrated.max_drift <= PROBE_FACTOR * drift
        )
        if explained and drift:
            ratio = max(ratio, migrated.max_drift / drift)
    unexplained = None if explained else (far or first_out or len(comparison.rows))
    return ProbeResult(departs_at, explained, unexplained, ratio, drift, blips, lasting_steps == 0)


def _ratio(migrated_sq: float, probe_sq: float) -> float:
    if probe_sq > 0:
        return math.sqrt(migrated_sq / probe_sq)
    # the probe never moved: nothing out of tolerance is rounding's doing
    return 0.0 if migrated_sq == 0 else math.inf


def transient(comparison: Comparison, index: int, rtol: float, atol: float) -> bool:
    """Whether the loss of row `index` is out of tolerance alone: the next step's agrees
    again. The weights then did not take a different step (a fault's difference persists):
    that loss value alone came out of the forward pass rounded differently."""
    if index + 1 >= len(comparison.rows):
        return False
    after = comparison.rows[index + 1]
    return after.abs_diff is not None and close(after.original, after.migrated, rtol, atol)


def may_explain(comparison: Comparison) -> bool:
    """Whether rounding could be all there is: the same steps at the same learning rates
    from the same weights, and step 1 (same weights, same batch: no growth yet) agreeing."""
    weights = comparison.weights
    return (
        comparison.step_count_problem is None
        and comparison.first_lr_divergence is None
        and weights.layout_problem is None
        and not weights.started_apart
        and comparison.first_loss_divergence != 1
    )


def rounding_reason(comparison: Comparison, probe: ProbeResult) -> tuple[str, str]:
    """The EQUIVALENT reason and its note when the probe accounts for every difference."""
    if probe.blips and probe.only_blips:
        return _blips_reason(comparison, probe)
    step = comparison.divergence_step
    where = (
        f"from step {probe.departs_at}"
        if probe.departs_at is not None
        else "to just within the tolerance"
    )
    reason = (
        f"{len(comparison.rows)} optimizer steps, equal up to rounding: the runs leave the "
        f"tolerance at step {step} (max |Δloss| {comparison.max_loss_diff:.3g}), and the "
        f"original run again, with rounding-sized changes at every step, differs from itself "
        f"{where}; the migrated run's differences are {probe.ratio:.2g}x "
        "the probe's (the launched run sums gradients and batch slices in another order)"
    )
    limit = min(probe.departs_at or step, step) - 1
    note = (
        "this training amplifies rounding differences (a high learning rate, long recurrences, "
        f"loss spikes): compared to fp32 tolerances it is exact only through step {limit} "
        f"(--max-steps {limit}); beyond, a difference smaller than rounding's growth cannot be "
        "seen"
        if limit >= 1
        else "this training amplifies rounding differences from its first steps: a "
        "difference smaller than rounding's growth cannot be seen"
    )
    return reason, note


def _blips_reason(comparison: Comparison, probe: ProbeResult) -> tuple[str, str]:
    """Every loss out of tolerance is alone, the next step agreeing again."""
    steps = ", ".join(str(step) for step in probe.blips)
    many = len(probe.blips) > 1
    reason = (
        f"{len(comparison.rows)} optimizer steps, equal up to rounding: only the loss of "
        f"step{'s' if many else ''} {steps} (max |Δloss| {comparison.max_loss_diff:.3g}) "
        f"{'are' if many else 'is'} out of tolerance, the next step agreeing again: the "
        "weights did not take another step, that forward pass rounded otherwise (each "
        "process computes its slice of the batch in other block sizes)"
    )
    note = (
        f"the original run with rounding-sized changes at every step differs from itself "
        f"{probe.ratio:.2g}x less there: a loss spike amplifies a forward pass's rounding "
        "more than the probe's nudges to gradients and weights do"
    )
    return reason, note


def not_rounding_note(probe: ProbeResult) -> str:
    at = probe.unexplained_step
    return (
        "the original run again, with rounding-sized changes at every step, differs from "
        f"itself far less: the migrated run's differences are "
        f"{probe.ratio:.2g}x the probe's, from step {at}. That points to a real difference; "
        "only an abrupt jump late in a long, unstable training can still be rounding that "
        "happened to cross a threshold (a ReLU unit, a near-zero Adam gradient) the probe did "
        "not cross"
    )
