"""The verdict from what the runs recorded: the per-step series (losses, learning rates, final
weights, with the rounding probe when no cause explains a difference) first, then how the
migrated run ended and what a user would check (`checks.py`). EQUIVALENT only when all agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from migrator.verify import causes as causes_module
from migrator.verify import probe as probe_module
from migrator.verify.checks import Checks
from migrator.verify.compare import Comparison, compare_runs
from migrator.verify.records import RunRecord
from migrator.verify.runs import RunResult
from migrator.verify.verdict import DIVERGED, EQUIVALENT, Outcome, Settings


@dataclass
class Judged:
    """The per-step judgement, before the other checks."""

    verdict: str
    reason: str
    comparison: Comparison
    causes: list
    notes: list[str]
    probe: probe_module.ProbeResult | None = None


def judge_steps(
    original: RunRecord,
    migrated: RunRecord,
    settings: Settings,
    *,
    summed_at: tuple[str, ...],
    run_probe,
) -> Judged:
    """`run_probe()`: the original again with rounding-sized nudges (a RunRecord or None)."""
    comparison = compare_runs(original, migrated, rtol=settings.rtol, atol=settings.atol)
    if comparison.equivalent:
        notes = causes_module.notes_when_equal(
            original.observed, nproc=settings.nproc, no_dropout=settings.no_dropout
        )
        weights = comparison.weights
        drift = (
            f", {weights.max_drift:.2g} of training's change"
            if weights.max_drift is not None
            else ""
        )
        reason = (
            f"{len(comparison.rows)} optimizer steps, max |Δloss| "
            f"{comparison.max_loss_diff:.3g}, final weights max |Δ| "
            f"{weights.max_abs_diff:.3g}{drift} ({weights.tensors} tensors)"
        )
        if notes:
            reason += f"; but {notes[0].split(':')[0]} (see note)"
        return Judged(EQUIVALENT, reason, comparison, [], notes)
    found = causes_module.find_causes(
        original.observed,
        comparison,
        nproc=settings.nproc,
        no_dropout=settings.no_dropout,
        runtime=settings.runtime,
        summed_at=summed_at,
    )
    probe, notes = None, []
    if not found and probe_module.may_explain(comparison):
        record = run_probe()
        if record is not None:
            probe = probe_module.judge(
                original, record, comparison, rtol=settings.rtol, atol=settings.atol
            )
        if probe is not None and probe.explained:
            reason, note = probe_module.rounding_reason(comparison, probe)
            return Judged(EQUIVALENT, reason, comparison, [], [note], probe)
        if probe is not None:
            notes.append(probe_module.not_rounding_note(probe))
    return Judged(DIVERGED, divergence_reason(comparison, found), comparison, found, notes, probe)


def outcome(judged: Judged, checks: Checks, settings: Settings, runs: list[RunResult]) -> Outcome:
    """The per-step judgement and the other checks together. An unfinished migrated run is
    the cause when the steps it made agree (the crash or hang came after them)."""
    problems = checks.problems()
    ended = problems[0] if checks.ending is not None and not checks.ending.finished else None
    steps_agree = judged.verdict == EQUIVALENT or _agree_as_far_as_run(judged.comparison)
    result = Outcome(
        judged.verdict,
        judged.reason,
        settings,
        judged.comparison,
        causes=list(judged.causes),
        notes=[*judged.notes, *checks.notes()],
        runs=runs,
        probe=judged.probe,
        checks=checks,
    )
    if ended is not None and steps_agree:
        compared = len(judged.comparison.rows)
        last = f" (the original made {compared} optimizer steps and finished)" if compared else ""
        result.verdict, result.on_steps = DIVERGED, False
        result.reason = f"{ended.message}{last}"
        result.causes = problems + [c for c in judged.causes if c.code != "steps"]
        return result
    if judged.verdict == DIVERGED:
        # unshared or doubly sharded data explains steps that differ: it comes first
        shares = [c for c in problems if c.code in ("unsharded", "sharded-twice")]
        rest = [c for c in problems if c not in shares]
        result.causes = shares + result.causes + rest
        if shares:
            result.reason = divergence_reason(judged.comparison, result.causes)
        return result
    if problems:
        result.verdict, result.on_steps = DIVERGED, False
        steps = len(judged.comparison.rows)
        result.reason = (
            f"{problems[0].message} (losses, learning rates and final weights agree over "
            f"{steps} optimizer steps)"
        )
        result.causes = problems
    return result


def _agree_as_far_as_run(comparison: Comparison) -> bool:
    """Every step the migrated run made agrees with the original's, and it made no more."""
    return (
        comparison.first_loss_divergence is None
        and comparison.first_lr_divergence is None
        and all(row.original is not None for row in comparison.rows)
    )


def not_comparable(original: RunRecord, nproc: int) -> str | None:
    if original.steps == 0:
        return (
            "the original made no optimizer step in its own process: there is no training "
            "to compare (training in processes it spawns, e.g. mp.spawn, is not recorded)"
        )
    problems = causes_module.batch_size_problems(original.observed, nproc, training_only=True)
    return "; ".join(problems) if problems else None


def epoch_scheduler_notes(migrated_path: Path) -> list[str]:
    from migrator.verify.source import prepared_epoch_schedulers

    try:
        found = prepared_epoch_schedulers(migrated_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return []
    return [
        f"{where} of the migrated script steps a prepared scheduler outside the loop that steps "
        "the optimizer: this comparison runs with split batches, where it advances once per "
        "call as in the original, but a real run on N processes (split_batches=False) "
        "advances it N times per call; leave a per-epoch scheduler out of "
        "accelerator.prepare, or use Accelerator(step_scheduler_with_optimizer=False)"
        for where in found
    ]


def summed_losses(script: Path) -> list[str]:
    from migrator.verify.source import summed_losses as found_in

    try:
        return found_in(script.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return []


def divergence_reason(comparison, found) -> str:
    step = comparison.divergence_step
    if comparison.first_loss_divergence is not None:
        row = comparison.rows[step - 1]
        text = (
            f"loss {row.original:.7g} (original) vs {row.migrated:.7g} (migrated), "
            f"|Δ| {row.abs_diff:.3g}; max |Δloss| {comparison.max_loss_diff:.3g}"
        )
    elif comparison.step_count_problem:
        text = comparison.step_count_problem
    elif comparison.first_lr_divergence is not None:
        row = comparison.rows[step - 1]
        text = (
            f"every loss agrees but the learning rate differs from step {step} "
            f"({row.lr_original:.6g} original, {row.lr_migrated:.6g} migrated)"
        )
    elif comparison.weights.layout_problem:
        text = comparison.weights.layout_problem
    else:
        text = "every loss agrees but the final weights differ: " + _weights_problem(
            comparison.weights
        )
    if found:
        text += f"; likely cause: {found[0].code}"
    return text


def _weights_problem(weights) -> str:
    if weights.started_apart:
        return (
            f"the runs started from different weights ({', '.join(weights.started_apart[:3])} "
            "differ before the first optimizer step)"
        )
    text = f"max |Δ| {weights.max_abs_diff:.3g} in {weights.worst}"
    if weights.max_drift is not None:
        text += (
            f"; {weights.drift_worst} ended {weights.max_drift:.3g} of training's change apart "
            f"(tolerance {weights.drift_tolerance:.3g})"
        )
    return text
