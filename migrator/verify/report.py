"""Showing an outcome: a rich table and a verdict line, or JSON with the per-step series.

The table and the verdict go to stdout; causes, notes and failed runs' stderr tails to stderr.
"""

from __future__ import annotations

import json
import math
import sys

from migrator.verify.checks import DEFECTS
from migrator.verify.verdict import COULD_NOT_RUN, EQUIVALENT, NOT_COMPARABLE, Outcome

HEAD_ROWS, TAIL_ROWS, AROUND_ROWS = 8, 4, 3
STYLES = {EQUIVALENT: "bold green", NOT_COMPARABLE: "bold yellow", COULD_NOT_RUN: "bold red"}


def print_outcome(outcome: Outcome, output_format: str) -> None:
    if output_format == "json":
        sys.stdout.write(json.dumps(outcome_as_dict(outcome), indent=2) + "\n")
        if outcome.verdict in (NOT_COMPARABLE, COULD_NOT_RUN):
            _print_stderr_tails(outcome)
        return
    print_text(outcome)


def _number(value: float | None):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None if value is None else str(value)
    return value


def outcome_as_dict(outcome: Outcome) -> dict:
    comparison = outcome.comparison
    data = {
        "verdict": outcome.verdict,
        "exit_code": outcome.exit_code,
        "step": outcome.step,
        "reason": outcome.reason,
        "max_abs_diff": _number(comparison.max_loss_diff) if comparison else None,
        "causes": [cause.as_dict() for cause in outcome.causes],
        "notes": outcome.notes,
        "settings": vars(outcome.settings),
        "steps": [],
        "weights": None,
        "runs": {},
        "findings": outcome.findings,
        "probe": outcome.probe.as_dict() if outcome.probe is not None else None,
        "checks": outcome.checks.as_dict() if outcome.checks is not None else None,
    }
    if comparison is not None:
        data["steps"] = [
            {
                "step": row.step,
                "original": _number(row.original),
                "migrated": _number(row.migrated),
                "abs_diff": _number(row.abs_diff),
                "per_rank": [_number(v) for v in row.per_rank],
                "lr_original": row.lr_original,
                "lr_migrated": row.lr_migrated,
            }
            for row in comparison.rows
        ]
        weights = comparison.weights
        data["weights"] = {
            "tensors": weights.tensors,
            "elements": weights.elements,
            "max_abs_diff": _number(weights.max_abs_diff),
            "worst": weights.worst,
            "mismatched": weights.mismatched,
            "layout_problem": weights.layout_problem,
            "max_drift": _number(weights.max_drift),
            "drift_worst": weights.drift_worst,
            "drift_tolerance": weights.drift_tolerance,
            "started_apart": weights.started_apart,
        }
    for run in outcome.runs:
        data["runs"][run.label] = {
            "returncode": run.returncode,
            "timed_out": run.timed_out,
            "seconds": round(run.seconds, 3),
            "stderr_tail": run.stderr_tail,
        }
    return data


def shown_rows(rows: list, step: int | None) -> list:
    """Rows to print: the start, the neighbourhood of the divergence, the end; None marks a gap."""
    keep = set(range(min(HEAD_ROWS, len(rows))))
    keep |= set(range(max(0, len(rows) - TAIL_ROWS), len(rows)))
    if step is not None:
        keep |= set(range(max(0, step - 1 - AROUND_ROWS), min(len(rows), step + AROUND_ROWS)))
    shown, previous = [], -1
    for index in sorted(keep):
        if index != previous + 1:
            shown.append(None)
        shown.append(rows[index])
        previous = index
    return shown


def _cell(value: float | None, digits: int = 8) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def print_text(outcome: Outcome) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out = Console(file=sys.stdout, highlight=False, soft_wrap=True)
    err = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    comparison = outcome.comparison
    settings = outcome.settings
    if comparison is not None:
        table = Table(
            title=f"{settings.script}: 1 process vs {settings.nproc} "
            f"({settings.runtime}, {settings.device})"
        )
        for name in ("step", "original", "migrated", "|Δ|"):
            table.add_column(name, justify="right")
        show_lr = comparison.first_lr_divergence is not None
        if show_lr:
            table.add_column("lr original", justify="right")
            table.add_column("lr migrated", justify="right")
        for row in shown_rows(comparison.rows, outcome.step):
            if row is None:
                table.add_row("…", "", "", "", *([""] * 2 if show_lr else []))
                continue
            style = "red" if outcome.step is not None and row.step >= outcome.step else None
            lr = [_cell(row.lr_original, 6), _cell(row.lr_migrated, 6)] if show_lr else []
            table.add_row(
                str(row.step),
                _cell(row.original),
                _cell(row.migrated),
                _cell(row.abs_diff, 3),
                *lr,
                style=style,
            )
        out.print(table)
        weights = comparison.weights
        if weights.layout_problem:
            out.print(f"final weights: {weights.layout_problem}")
        else:
            drift = (
                f", apart by {weights.max_drift:.2g} of training's change ({weights.drift_worst};"
                f" tolerance {weights.drift_tolerance:.2g})"
                if weights.max_drift is not None
                else ""
            )
            out.print(
                f"final weights: {weights.tensors} tensors, {weights.elements} values, "
                f"max |Δ| {weights.max_abs_diff:.3g} ({weights.worst}){drift}"
                + (
                    f", out of tolerance: {', '.join(weights.mismatched[:5])}"
                    if weights.mismatched
                    else ""
                )
            )
    if outcome.checks is not None:
        for line in check_lines(outcome.checks, settings.nproc):
            out.print(escape(line))
    tolerances = f"  (rtol {settings.rtol:g}, atol {settings.atol:g})" if comparison else ""
    out.print(
        f"[{STYLES.get(outcome.verdict, 'bold red')}]{escape(outcome.headline)}[/]" + tolerances
    )
    for index, cause in enumerate(outcome.causes):
        label = "likely cause" if index == 0 else "possible cause"
        how = "to fix" if cause.code in DEFECTS else "to compare anyway"
        err.print(escape(f"{label} ({cause.code}): {cause.message}\n  {how}: {cause.remedy}"))
    for note in outcome.notes:
        err.print(escape(f"note: {note}"))
    for finding in outcome.findings:
        err.print(escape(finding))
    if outcome.verdict in (NOT_COMPARABLE, COULD_NOT_RUN) or _ended_badly(outcome):
        _print_stderr_tails(outcome)


def _ended_badly(outcome: Outcome) -> bool:
    return any(cause.code in ("crashed", "exited") for cause in outcome.causes)


def check_lines(checks, nproc: int) -> list[str]:
    """One line per check beyond the step table: what was compared and how it came out."""
    lines = []
    for stream in checks.outputs:
        state = f"{len(stream.differences)} differ" if stream.differences else "agree"
        lines.append(f"{stream.stream}: {stream.compared} numbers compared, {state}")
    files = checks.files
    if files is not None and files.written:
        bad = len(files.duplicates) + len(files.missing) + len(files.checkpoints)
        lines.append(
            f"files: {files.written} written by the original"
            + (f", {bad} problem{'s' if bad > 1 else ''}" if bad else ", each by one process")
            + (f"; logs read back: {len(files.trackers)}" if files.trackers else "")
        )
    if checks.shares is not None:
        each = " + ".join(str(count) for count in checks.shares.per_rank)
        lines.append(
            f"work shared: the original drew {checks.shares.original} training samples, "
            f"the {nproc} processes {each}"
        )
    if checks.ending is not None and checks.ending.finished and checks.max_steps is None:
        lines.append("end: both runs finished")
    for launch in checks.launches:
        state = "finished" if launch.ending.finished else launch.ending.kind
        lines.append(f"launched as users do ({launch.how}): {state}")
    return lines


def _print_stderr_tails(outcome: Outcome) -> None:
    for run in outcome.runs:
        tail = run.stderr_tail
        if tail:
            print(f"--- {run.label} run: stderr (last lines) ---\n{tail}", file=sys.stderr)
