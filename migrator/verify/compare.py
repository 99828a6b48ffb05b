"""Comparing two recorded runs: per-step loss (mean over ranks), learning rate, final weights.

Losses and learning rates are close when |migrated - original| <= atol + rtol * |original|
(numpy's isclose). A final weight tensor agrees when every element is close that way, or when
the whole tensor is close relative to how far training moved it:

    ||w_migrated - w_original|| <= DRIFT_FACTOR * rtol * ||w_original - w_initial||

(Euclidean norms over the tensor; w_initial is the tensor just before the first optimizer
step). Rounding differences between a 1-process and an N-process run (the order in which
gradients are summed) change every update by a relative ~1e-7; an optimizer that normalises
per element (Adam) turns that into absolute differences of up to ~lr on elements whose
gradient is near zero, which fail an elementwise test although the run is exact. Measured over
10 to 600 steps (SGD, Adam, RNN, CNN), the drift of exact migrations stays below 2e-6 of what
training moved; a wrong step (one skipped, extra, unscaled or uncleared) moves a tensor by a
sizeable fraction of it. See README.md, "Reading the result".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from migrator.verify.records import Parameter, RunRecord


@dataclass
class StepRow:
    step: int  # 1-based optimizer step
    original: float | None
    migrated: float | None
    per_rank: list[float]
    lr_original: float | None
    lr_migrated: float | None

    @property
    def abs_diff(self) -> float | None:
        if self.original is None or self.migrated is None:
            return None
        return abs(self.migrated - self.original)


DRIFT_FACTOR = 10  # weights accumulate rounding over steps: ~10x a loss's, same margin


@dataclass
class WeightsComparison:
    tensors: int = 0
    elements: int = 0
    max_abs_diff: float = 0.0
    worst: str | None = None  # the parameter holding the largest difference
    mismatched: list[str] = field(default_factory=list)  # names of tensors out of tolerance
    layout_problem: str | None = None
    # max over tensors of ||w_migrated - w_original|| / ||w_original - w_initial||; None when
    # no initial weights were recorded
    max_drift: float | None = None
    drift_worst: str | None = None
    drift_tolerance: float = 0.0
    started_apart: list[str] = field(default_factory=list)  # initial weights differ


@dataclass
class Comparison:
    rows: list[StepRow]
    first_loss_divergence: int | None  # 1-based step, None when all steps are close
    first_lr_divergence: int | None
    step_count_problem: str | None
    weights: WeightsComparison
    max_loss_diff: float

    @property
    def equivalent(self) -> bool:
        return (
            self.first_loss_divergence is None
            and self.first_lr_divergence is None
            and self.step_count_problem is None
            and self.weights.layout_problem is None
            and not self.weights.mismatched
        )

    @property
    def divergence_step(self) -> int | None:
        if self.first_loss_divergence is not None:
            return self.first_loss_divergence
        if self.step_count_problem is not None:
            unmatched = [row.step for row in self.rows if row.abs_diff is None]
            return unmatched[0] if unmatched else len(self.rows)
        if self.first_lr_divergence is not None:
            return self.first_lr_divergence  # every loss matched: a later update did not
        if not self.equivalent:
            return len(self.rows)  # every loss matched: the final weights did not
        return None


def close(original: float, migrated: float, rtol: float, atol: float) -> bool:
    if math.isnan(original) or math.isnan(migrated):
        return math.isnan(original) and math.isnan(migrated)
    return abs(migrated - original) <= atol + rtol * abs(original)


def compare_runs(
    original: RunRecord, migrated: RunRecord, *, rtol: float, atol: float
) -> Comparison:
    original_losses = original.mean_losses()
    migrated_losses = migrated.mean_losses()
    original_lrs = original.ranks[0].step_lrs
    migrated_lrs = migrated.ranks[0].step_lrs
    rows, first_loss, first_lr, max_diff = [], None, None, 0.0
    for index in range(max(len(original_losses), len(migrated_losses))):
        row = StepRow(
            step=index + 1,
            original=_at(original_losses, index),
            migrated=_at(migrated_losses, index),
            per_rank=[r.step_losses[index] for r in migrated.ranks if index < len(r.step_losses)],
            lr_original=_at(original_lrs, index),
            lr_migrated=_at(migrated_lrs, index),
        )
        rows.append(row)
        if row.abs_diff is None:
            continue
        max_diff = max(max_diff, row.abs_diff) if not math.isnan(row.abs_diff) else math.inf
        if first_loss is None and not close(row.original, row.migrated, rtol, atol):
            first_loss = row.step
        if (
            first_lr is None
            and row.lr_original is not None
            and row.lr_migrated is not None
            and not close(row.lr_original, row.lr_migrated, rtol, 0.0)
        ):
            first_lr = row.step
    step_problem = None
    counts = {len(r.step_losses) for r in migrated.ranks}
    if len(counts) > 1:
        step_problem = f"the migrated run's ranks made different numbers of steps: {sorted(counts)}"
    elif len(original_losses) != len(migrated_losses):
        step_problem = (
            f"the original made {len(original_losses)} optimizer steps, the migrated "
            f"run {len(migrated_losses)}"
        )
    weights = compare_weights(original.parameters, migrated.parameters, rtol=rtol, atol=atol)
    return Comparison(rows, first_loss, first_lr, step_problem, weights, max_diff)


def _at(values: list, index: int):
    return values[index] if index < len(values) else None


def compare_weights(
    original: list[Parameter] | None, migrated: list[Parameter] | None, *, rtol: float, atol: float
) -> WeightsComparison:
    result = WeightsComparison(drift_tolerance=DRIFT_FACTOR * rtol)
    if original is None or migrated is None:
        result.layout_problem = "a run saved no final parameters"
        return result
    if [p.shape for p in original] != [p.shape for p in migrated]:
        result.layout_problem = (
            f"the optimizers hold different parameters: {len(original)} "
            f"tensors in the original, {len(migrated)} in the migrated run"
        )
        return result
    for before, after in zip(original, migrated):
        result.tensors += 1
        result.elements += len(before.values)
        worst, elementwise_close = _max_abs_diff(before.values, after.values, rtol, atol)
        if result.worst is None or worst > result.max_abs_diff:
            result.max_abs_diff, result.worst = worst, before.name
        if _started_apart(before, after, rtol, atol):
            result.started_apart.append(before.name)
            result.mismatched.append(before.name)
            continue
        drift = _drift(before, after)
        if drift is not None and (result.max_drift is None or drift > result.max_drift):
            result.max_drift, result.drift_worst = drift, before.name
        if elementwise_close:
            continue
        if drift is None or not drift <= result.drift_tolerance:  # NaN: out of tolerance
            result.mismatched.append(before.name)
    return result


def _max_abs_diff(before, after, rtol: float, atol: float) -> tuple[float, bool]:
    """The largest |after - before| (inf for NaN) and whether every element is close."""
    worst, close_everywhere = 0.0, True
    for a, b in zip(before, after):
        diff = abs(b - a)
        if not diff <= atol + rtol * abs(a):  # also true for NaN
            close_everywhere = False
            if math.isnan(diff):
                diff = math.inf
        worst = max(worst, diff)
    return worst, close_everywhere


def _started_apart(original: Parameter, migrated: Parameter, rtol: float, atol: float) -> bool:
    """Whether the runs' tensors differed before the first optimizer step (where both are
    known): then the runs did not train the same model from the start."""
    if original.initial is None or migrated.initial is None:
        return False
    known = [
        (a, b)
        for a, b in zip(original.initial, migrated.initial)
        if not (math.isnan(a) or math.isnan(b))
    ]
    return not _max_abs_diff([a for a, _ in known], [b for _, b in known], rtol, atol)[1]


def _drift(original: Parameter, migrated: Parameter) -> float | None:
    """||w_migrated - w_original|| / ||w_original - w_initial||: how far apart the runs ended,
    as a fraction of how far training moved the tensor (inf when it did not move; None
    without initial weights)."""
    if original.initial is None or any(math.isnan(v) for v in original.initial):
        return None
    apart = math.fsum((b - a) ** 2 for a, b in zip(original.values, migrated.values))
    moved = math.fsum((a - i) ** 2 for a, i in zip(original.values, original.initial))
    if math.isnan(apart):
        return math.nan
    if moved == 0.0:
        return 0.0 if apart == 0.0 else math.inf
    return math.sqrt(apart / moved)
