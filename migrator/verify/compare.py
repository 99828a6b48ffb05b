"""Comparing two recorded runs: per-step loss (mean over ranks), learning rate, final weights.

Values are close when |migrated - original| <= atol + rtol * |original| (numpy's isclose).
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


@dataclass
class WeightsComparison:
    tensors: int = 0
    elements: int = 0
    max_abs_diff: float = 0.0
    worst: str | None = None  # the parameter holding the largest difference
    mismatched: list[str] = field(default_factory=list)  # names of tensors out of tolerance
    layout_problem: str | None = None


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
    result = WeightsComparison()
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
        worst, out_of_tolerance = 0.0, False
        for a, b in zip(before.values, after.values):
            diff = abs(b - a)
            if not diff <= atol + rtol * abs(a):  # also true for NaN
                out_of_tolerance = True
                if math.isnan(diff):
                    diff = math.inf
            worst = max(worst, diff)
        if result.worst is None or worst > result.max_abs_diff:
            result.max_abs_diff, result.worst = worst, before.name
        if out_of_tolerance:
            result.mismatched.append(before.name)
    return result
