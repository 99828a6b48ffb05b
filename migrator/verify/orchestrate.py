"""`migrate verify`: migrate in memory, run the original and the migrated script under the
recorder, compare, name causes, report. torch is never imported here, only in the runs."""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from migrator.verify import causes as causes_module
from migrator.verify import probe as probe_module
from migrator.verify.compare import compare_runs
from migrator.verify.records import RunRecord, read_run
from migrator.verify.runs import RunResult, RunSpec, StartedRun, finish, start, stop_everything
from migrator.verify.verdict import (
    COULD_NOT_RUN,
    DIVERGED,
    EQUIVALENT,
    NOT_COMPARABLE,
    Outcome,
    Settings,
)

CUDA_TOLERANCES = (1e-3, 1e-5)  # GPU vs CPU fp32: different kernels, different sums
CPU_TOLERANCES = (1e-5, 1e-6)


@dataclass
class VerifyRequest:
    script: str
    script_args: list[str]
    nproc: int = 2
    device: str = "cpu"
    runtime: str = "runtime"
    max_steps: int | None = None
    rtol: float | None = None
    atol: float | None = None
    timeout: float = 600.0
    output_format: str = "text"
    no_dropout: bool = False


def default_tolerances(device: str) -> tuple[float, float]:
    return CUDA_TOLERANCES if device == "cuda" else CPU_TOLERANCES


def run_verify(request: VerifyRequest) -> int:
    from migrator.verify.report import print_outcome

    # SIGTERM unwinds like Ctrl-C, so the runs are stopped and the temporary folder removed
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    outcome = verify(request)
    print_outcome(outcome, request.output_format)
    return outcome.exit_code


def verify(request: VerifyRequest) -> Outcome:
    rtol, atol = default_tolerances(request.device)
    settings = Settings(
        script=request.script,
        nproc=request.nproc,
        device=request.device,
        runtime=request.runtime,
        max_steps=request.max_steps,
        no_dropout=request.no_dropout,
        rtol=rtol if request.rtol is None else request.rtol,
        atol=atol if request.atol is None else request.atol,
    )
    problem = _usage_problem(request)
    if problem:
        return Outcome(COULD_NOT_RUN, problem, settings)
    deadline = time.monotonic() + request.timeout
    script = Path(request.script).resolve()
    work_dir = Path(tempfile.mkdtemp(prefix="migrate-verify-"))
    try:
        # the original starts first: it needs no migration, and starting Python and torch
        # is most of a small run's time
        original_run = start(_spec(request, "original", script, script, None), work_dir)
        try:
            try:
                migrated_text, findings, migrated_script = _migrate_any(script, request, work_dir)
            except ValueError as error:
                return Outcome(COULD_NOT_RUN, str(error), settings)
            if migrated_text is None and migrated_script is None:
                return Outcome(
                    NOT_COMPARABLE,
                    "migrate changes nothing in this script: there "
                    "is no migrated version to compare",
                    settings,
                    findings=findings,
                )
            migrated_path = migrated_script or work_dir / f"migrated_{script.name}"
            if migrated_script is None:
                migrated_path.write_text(migrated_text, encoding="utf-8")
            outcome = _run_and_compare(
                request, settings, script, original_run, migrated_path, work_dir, deadline,
                program=migrated_script is not None,
            )  # fmt: skip
        finally:
            stop_everything(original_run.process, original_run.pid_dir)
        outcome.findings = findings
        return outcome
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _usage_problem(request: VerifyRequest) -> str | None:
    if not Path(request.script).is_file():
        return f"{request.script}: no such file"
    if request.nproc < 1:
        return "--nproc must be at least 1"
    if request.max_steps is not None and request.max_steps < 1:
        return "--max-steps must be at least 1"
    if request.runtime == "accelerate":
        try:
            import importlib.util

            if importlib.util.find_spec("accelerate") is None:
                return "--runtime accelerate needs HF Accelerate: pip install accelerate"
        except ValueError:
            pass
    return None


def _migrate_any(script: Path, request: VerifyRequest, work_dir: Path):
    """(migrated text, findings, None) for one file; (None, findings, the migrated entry in a
    copy of the project) for a program of several files (`program_copy.py`)."""
    from migrator.verify.program_copy import migrated_program

    try:
        program = migrated_program(script, request.runtime, work_dir)
    except Exception as error:  # noqa: BLE001 - reported like any migration problem
        raise ValueError(f"{script}: cannot migrate the program: {error}") from None
    if program is not None:
        return None, program[1], program[0]
    return (*_migrate(script, request.runtime), None)


def _migrate(script: Path, target: str):
    from migrator.engine import MigrationError, Options, migrate_text

    try:
        text = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{script}: cannot read: {error}") from None
    try:
        new_text, findings = migrate_text(text, Options(target=target))
    except MigrationError as error:
        raise ValueError(f"{script}: cannot migrate: {error}") from None
    return new_text, [finding.render(str(script)) for finding in findings]


def _spec(
    request: VerifyRequest, label: str, source: Path, script: Path, nproc: int | None
) -> RunSpec:
    return RunSpec(
        label=label,
        source_path=source,
        script_path=script,
        script_args=request.script_args,
        nproc=nproc,
        runtime=request.runtime,
        device=request.device,
        max_steps=request.max_steps,
        no_dropout=request.no_dropout,
        # HF Accelerate draws an unseeded sampler's seed at prepare: give both runs a generator
        seed_shuffle=request.runtime == "accelerate",
    )


def _say(request: VerifyRequest, message: str) -> None:
    print(f"migrate verify: {message}", file=sys.stderr, flush=True)


def _record(result: RunResult, nproc: int) -> tuple[RunRecord | None, str | None]:
    """The run's record, or why there is none usable."""
    if result.timed_out:
        return None, f"the {result.label} run did not finish within the time limit (--timeout)"
    try:
        record = read_run(result.run_dir, nproc)
    except (FileNotFoundError, ValueError, KeyError) as error:
        return None, f"the {result.label} run failed (exit code {result.returncode}; {error})"
    failed = [r for r in record.ranks if r.status in ("crashed", "exited")]
    if failed:
        where = f" on rank {failed[0].rank}" if nproc > 1 else ""
        return None, (
            f"the {result.label} run failed{where} after "
            f"{len(failed[0].step_losses)} optimizer steps: {failed[0].error}"
        )
    if result.returncode != 0:
        return None, f"the {result.label} run failed (exit code {result.returncode})"
    return record, None


def _run_and_compare(
    request: VerifyRequest,
    settings: Settings,
    script: Path,
    original_run: StartedRun,
    migrated_path: Path,
    work_dir: Path,
    deadline: float,
    program: bool = False,
) -> Outcome:
    """`program`: `migrated_path` is the entry of a migrated copy of the program, which runs
    as itself (its folder first on sys.path, so it imports the migrated helpers)."""
    launcher = "migrate launch" if request.runtime == "runtime" else "torch.distributed.run"
    _say(
        request,
        f"running the original (python {script.name}) and the migrated script "
        f"({launcher} --nproc {request.nproc}, {request.runtime}, split_batches=True)",
    )
    as_script = migrated_path if program else script
    migrated_run = start(
        _spec(request, "migrated", migrated_path, as_script, request.nproc), work_dir
    )
    try:
        runs = [finish(original_run, deadline)]
        original, problem = _record(runs[0], 1)
        if original is not None:
            problem = _not_comparable(original, request.nproc)
            if problem is not None:
                finish(migrated_run, time.monotonic())  # not needed: stopped, not reported
                return Outcome(NOT_COMPARABLE, problem, settings, runs=runs)
        runs.append(finish(migrated_run, deadline))
    finally:
        stop_everything(migrated_run.process, migrated_run.pid_dir)
    if original is None:
        return Outcome(COULD_NOT_RUN, problem, settings, runs=runs)
    migrated, problem = _record(runs[1], request.nproc)
    if migrated is None:
        batch_problems = causes_module.batch_size_problems(
            original.observed, request.nproc, training_only=False
        )
        if batch_problems and not runs[1].timed_out:
            return Outcome(NOT_COMPARABLE, "; ".join(batch_problems), settings, runs=runs)
        return Outcome(COULD_NOT_RUN, problem, settings, runs=runs)
    outcome = _compare(request, settings, script, original, migrated, runs, work_dir, deadline)
    outcome.notes.extend(_epoch_scheduler_notes(migrated_path))
    return outcome


def _not_comparable(original: RunRecord, nproc: int) -> str | None:
    if original.steps == 0:
        return (
            "the original made no optimizer step in its own process: there is no training "
            "to compare (training in processes it spawns, e.g. mp.spawn, is not recorded)"
        )
    problems = causes_module.batch_size_problems(original.observed, nproc, training_only=True)
    return "; ".join(problems) if problems else None


def _compare(
    request: VerifyRequest,
    settings: Settings,
    script: Path,
    original: RunRecord,
    migrated: RunRecord,
    runs: list[RunResult],
    work_dir: Path,
    deadline: float,
) -> Outcome:
    comparison = compare_runs(original, migrated, rtol=settings.rtol, atol=settings.atol)
    if comparison.equivalent:
        notes = causes_module.notes_when_equal(
            original.observed, nproc=request.nproc, no_dropout=request.no_dropout
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
        return Outcome(EQUIVALENT, reason, settings, comparison, notes=notes, runs=runs)
    found = causes_module.find_causes(
        original.observed,
        comparison,
        nproc=request.nproc,
        no_dropout=request.no_dropout,
        runtime=request.runtime,
        summed_at=tuple(_summed_losses(script)),
    )
    probe, notes = None, []
    if not found and probe_module.may_explain(comparison):
        _say(request, "no known cause: probing how this training amplifies rounding")
        spec = replace(
            _spec(request, "probe", script, script, None), nudge=True, max_steps=original.steps
        )
        result = finish(start(spec, work_dir), deadline)
        record, _ = _record(result, 1)
        if record is not None:
            probe = probe_module.judge(
                original, record, comparison, rtol=settings.rtol, atol=settings.atol
            )
        if probe is not None and probe.explained:
            reason, note = probe_module.rounding_reason(comparison, probe)
            return Outcome(
                EQUIVALENT, reason, settings, comparison, notes=[note], runs=runs, probe=probe
            )
        if probe is not None:
            notes.append(probe_module.not_rounding_note(probe))
    return Outcome(
        DIVERGED,
        _divergence_reason(comparison, found),
        settings,
        comparison,
        causes=found,
        notes=notes,
        runs=runs,
        probe=probe,
    )


def _epoch_scheduler_notes(migrated_path: Path) -> list[str]:
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


def _summed_losses(script: Path) -> list[str]:
    from migrator.verify.source import summed_losses

    try:
        return summed_losses(script.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return []


def _divergence_reason(comparison, found) -> str:
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
