"""`migrate verify`: migrate in memory (or take a migration made elsewhere, `--against`), run
the original and the migrated program under the recorder, the migrated one also as users
launch it, compare, name causes, report. torch is never imported here, only in the runs."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from migrator.verify import causes as causes_module
from migrator.verify import judge
from migrator.verify.checks import Run, compare_checks
from migrator.verify.ending import describe
from migrator.verify.launches import finish_launches, start_launches, stop_launches
from migrator.verify.migration import MigratedProgram, migrated_program, runtime_of
from migrator.verify.records import RunRecord, read_run
from migrator.verify.runs import RunResult, RunSpec, StartedRun, finish, start, stop_everything
from migrator.verify.verdict import (
    COULD_NOT_RUN,
    EQUIVALENT,
    NOT_COMPARABLE,
    Outcome,
    Settings,
)

CUDA_TOLERANCES = (1e-3, 1e-5)  # GPU vs CPU fp32: different kernels, different sums
CPU_TOLERANCES = (1e-5, 1e-6)
# a run with no heartbeat for max(STALL_MIN_S, STALL_FACTOR x the original's longest quiet
# spell) has hung: N processes on shared cores are slower, a hang never beats again
STALL_MIN_S = 20.0
STALL_FACTOR = 10.0


@dataclass
class VerifyRequest:
    script: str
    script_args: list[str]
    nproc: int = 2
    device: str = "cpu"
    runtime: str | None = None  # None: runtime, or what an --against program imports
    max_steps: int | None = None
    rtol: float | None = None
    atol: float | None = None
    timeout: float = 600.0
    output_format: str = "text"
    no_dropout: bool = False
    against: str | None = None  # a migration made elsewhere: its entry file or folder


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
    problem = _usage_problem(request)
    against = None
    if problem is None and request.against is not None:
        try:
            against = migrated_program(Path(request.script), "", Path(), request.against)
        except ValueError as error:
            problem = str(error)
        else:
            runtime = request.runtime or runtime_of(against.entry)
            request = replace(request, runtime=runtime)
    request = replace(request, runtime=request.runtime or "runtime")
    settings = Settings(
        script=request.script,
        nproc=request.nproc,
        device=request.device,
        runtime=request.runtime,
        max_steps=request.max_steps,
        no_dropout=request.no_dropout,
        rtol=rtol if request.rtol is None else request.rtol,
        atol=atol if request.atol is None else request.atol,
        against=str(against.entry) if against else None,
    )
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
                program = against or migrated_program(script, request.runtime, work_dir, None)
            except ValueError as error:
                return Outcome(COULD_NOT_RUN, str(error), settings)
            if program.entry is None:
                return Outcome(
                    NOT_COMPARABLE,
                    "migrate changes nothing in this script: there "
                    "is no migrated version to compare",
                    settings,
                    findings=program.findings,
                )
            outcome = _run_and_compare(
                request, settings, script, original_run, program, work_dir, deadline
            )
        finally:
            stop_everything(original_run.process, original_run.pid_dir)
        outcome.findings = program.findings
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
        device=request.device if nproc is not None else "cpu",  # the original: on the CPU
        max_steps=request.max_steps,
        no_dropout=request.no_dropout,
        # HF Accelerate draws an unseeded sampler's seed at prepare: give both runs a generator
        seed_shuffle=request.runtime == "accelerate",
    )


def _say(request: VerifyRequest, message: str) -> None:
    print(f"migrate verify: {message}", file=sys.stderr, flush=True)


def _original_record(result: RunResult) -> tuple[RunRecord | None, str | None]:
    """The original's record, or why there is none usable."""
    if result.timed_out:
        return None, "the original run did not finish within the time limit (--timeout)"
    try:
        record = read_run(result.run_dir, 1)
    except (FileNotFoundError, ValueError, KeyError) as error:
        return None, f"the original run failed (exit code {result.returncode}; {error})"
    rank = record.ranks[0]
    if rank.status in ("crashed", "exited"):
        return None, (
            f"the original run failed after {len(rank.step_losses)} optimizer steps: {rank.error}"
        )
    if result.returncode != 0:
        return None, f"the original run failed (exit code {result.returncode})"
    return record, None


def _migrated_record(result: RunResult, nproc: int) -> RunRecord | None:
    try:
        record = read_run(result.run_dir, nproc, partial=True)
    except (OSError, ValueError, KeyError):
        return None
    return record if any(r.status != "killed" or r.step_losses for r in record.ranks) else None


def _run_and_compare(
    request: VerifyRequest,
    settings: Settings,
    script: Path,
    original_run: StartedRun,
    program: MigratedProgram,
    work_dir: Path,
    deadline: float,
) -> Outcome:
    """A program that runs as itself (a migrated copy of a program, or a migration made
    elsewhere) starts from its own path: its folder first on sys.path, so it imports its
    own helper modules."""
    launcher = "migrate launch" if request.runtime == "runtime" else "torch.distributed.run"
    _say(
        request,
        f"running the original (python {script.name}) and the migrated program "
        f"({launcher} --nproc {request.nproc}, {request.runtime}, split_batches=True; also "
        "on 1 process, and as launched, without split batches)",
    )
    migrated_path = program.entry
    as_script = migrated_path if program.runs_as_itself else script
    spec = _spec(request, "migrated", migrated_path, as_script, request.nproc)
    migrated_run = start(spec, work_dir)
    together = _launches_alongside(request)
    launches = start_launches(spec, work_dir) if together else []
    try:
        runs = [finish(original_run, deadline, watching=(migrated_run, *launches))]
        original, problem = _original_record(runs[0])
        if original is not None:
            problem = judge.not_comparable(original, request.nproc)
            if problem is not None:
                return Outcome(NOT_COMPARABLE, problem, settings, runs=runs)
        if original is None:
            # both runs' stderr tails are shown: the migrated one often fails the same way
            runs.append(finish(migrated_run, deadline, STALL_MIN_S))
            return Outcome(COULD_NOT_RUN, problem, settings, runs=runs)
        quiet = max(rank.max_quiet_s for rank in original.ranks)
        stall_s = max(STALL_MIN_S, STALL_FACTOR * quiet)
        runs.append(finish(migrated_run, deadline, stall_s, watching=tuple(launches)))
        migrated = _migrated_record(runs[1], request.nproc)
        ending = describe(runs[1], migrated, request.nproc)
        if not ending.finished:
            batch_problems = causes_module.batch_size_problems(
                original.observed, request.nproc, training_only=False
            )
            if batch_problems and ending.kind != "hung":
                return Outcome(NOT_COMPARABLE, "; ".join(batch_problems), settings, runs=runs)
            if migrated is None or ending.kind in ("timed-out", "failed"):
                return Outcome(
                    COULD_NOT_RUN, f"the migrated run {ending.message}", settings, runs=runs
                )
        probe_runs: list = []
        judged = judge.judge_steps(
            original,
            migrated,
            settings,
            summed_at=tuple(judge.summed_losses(script)),
            run_probe=lambda: _probe(request, script, original, work_dir, deadline, probe_runs),
        )
        checks = compare_checks(
            Run(original, runs[0].run_dir, runs[0].sandbox),
            Run(migrated, runs[1].run_dir, runs[1].sandbox),
            request.nproc,
            rtol=settings.rtol,
            atol=settings.atol,
            probe=probe_runs[0] if probe_runs and judged.probe and judged.probe.explained else None,
        )
        checks.ending = ending
        if original.ranks[0].status == "stopped":  # --max-steps cut the program short
            checks.max_steps = request.max_steps
        if judged.verdict == EQUIVALENT and not checks.problems():
            if not together:
                launches = start_launches(spec, work_dir)
            results, launch_runs = finish_launches(launches, deadline, stall_s, as_script.name)
            checks.launches = results
            runs.extend(launch_runs)
        else:
            checks.launches_not_judged = (
                "the migrated program was not judged as users launch it (1 process; "
                f"{request.nproc} without split batches): the comparison already differs"
            )
    finally:
        stop_everything(migrated_run.process, migrated_run.pid_dir)
        stop_launches(launches)
    outcome = judge.outcome(judged, checks, settings, runs)
    outcome.notes.extend(judge.epoch_scheduler_notes(migrated_path))
    return outcome


def _launches_alongside(request: VerifyRequest) -> bool:
    """The launches as users run them start with the compared runs when the machine has a
    core for each process (and the runs train on the CPU); else after them, and only when
    the comparison found nothing (a DIVERGED verdict does not wait for them)."""
    processes = 2 * request.nproc + 2
    return request.device == "cpu" and (os.cpu_count() or 1) >= processes


def _probe(request, script, original, work_dir, deadline, keep: list) -> RunRecord | None:
    _say(request, "no known cause: probing how this training amplifies rounding")
    spec = replace(
        _spec(request, "probe", script, script, None), nudge=True, max_steps=original.steps
    )
    result = finish(start(spec, work_dir), deadline)
    record, _ = _original_record(result)
    if record is not None:
        keep.append(Run(record, result.run_dir, result.sandbox))
    return record
