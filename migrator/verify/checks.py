"""What a user would check beyond losses and weights, gathered for the verdict and the report:
the main process's output (`outputs.py`), the files each process wrote (`files.py`), whether
the work is shared (`shares.py`), how the runs ended (`ending.py`) and the other launches
(`launches.py`). Each problem becomes a cause of a DIVERGED verdict; what a user should know
although nothing is wrong becomes a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from migrator.verify.causes import Cause
from migrator.verify.ending import Ending
from migrator.verify.files import FileComparison, RunFiles, compare_files
from migrator.verify.launches import LaunchResult
from migrator.verify.numbers import Line
from migrator.verify.outputs import (
    Losses,
    StreamComparison,
    compare_stream,
    duplicates,
    read_capture,
)
from migrator.verify.records import RunRecord
from migrator.verify.shares import Shares, compare_shares

STREAMS = ("stdout", "log")
# causes that are faults of the migration (to fix), not differences of the comparison
DEFECTS = frozenset(
    {
        "crashed",
        "exited",
        "hung",
        "unsharded",
        "sharded-twice",
        "output",
        "tracker",
        "file-written-twice",
        "checkpoint",
        "file-missing",
        "launch-crashed",
        "launch-exited",
        "launch-hung",
        "launch-failed",
    }
)


@dataclass
class Checks:
    outputs: list[StreamComparison] = field(default_factory=list)
    duplicates: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    files: FileComparison | None = None
    shares: Shares | None = None
    ending: Ending | None = None  # the compared migrated run's
    launches: list[LaunchResult] = field(default_factory=list)
    launches_not_judged: str | None = None
    max_steps: int | None = None

    def problems(self) -> list[Cause]:
        found = []
        if self.ending is not None and not self.ending.finished:
            found.append(
                Cause(
                    self.ending.kind,
                    f"the migrated run {self.ending.message}",
                    _ENDING_REMEDY.get(self.ending.kind, ""),
                )
            )
        if self.shares is not None and self.shares.problem:
            found.append(Cause(self.shares.code, self.shares.problem, _SHARES_REMEDY))
        for stream in self.outputs + (self.files.trackers if self.files else []):
            if stream.differences:
                found.append(_output_cause(stream))
        if self.files is not None:
            found += [
                Cause("file-written-twice", text, _FILE_REMEDY) for text in self.files.duplicates
            ]
            found += [
                Cause("checkpoint", text, _CHECKPOINT_REMEDY) for text in self.files.checkpoints
            ]
            found += [Cause("file-missing", text, _MISSING_REMEDY) for text in self.files.missing]
        for launch in self.launches:
            if launch.problem:
                found.append(Cause(f"launch-{launch.ending.kind}", launch.problem, _LAUNCH_REMEDY))
        return found

    def notes(self) -> list[str]:
        notes = []
        if self.max_steps is not None:
            notes.append(
                f"--max-steps {self.max_steps}: both runs stopped after step {self.max_steps}; "
                "the rest of the program (later training, evaluation, saving, its end) was "
                "not run, so a crash, hang or difference there is not seen"
            )
        for stream, ranks in self.duplicates.items():
            for rank, lines in ranks.items():
                notes.append(
                    f"rank {rank} also shows {len(lines)} line{'s' if len(lines) > 1 else ''} "
                    f"of {stream} (first: {lines[0][:80]!r}): each is shown once per process "
                    "(accelerator.print, or if accelerator.is_main_process, shows it once)"
                )
        for stream in self.outputs + (self.files.trackers if self.files else []):
            if stream.per_process:
                count = len(stream.per_process)
                notes.append(
                    f"{stream.stream}: {count} number{'s' if count > 1 else ''} the main "
                    "process shows differ from the original's as one process's share does "
                    f"(first: {stream.per_process[0]})"
                )
        for stream in self.outputs:
            if stream.missing:
                notes.append(
                    f"{stream.stream}: the migrated main process does not show "
                    f"{len(stream.missing)} line{'s' if len(stream.missing) > 1 else ''} "
                    f"the original shows (first: {stream.missing[0][:80]!r})"
                )
        if self.launches_not_judged:
            notes.append(self.launches_not_judged)
        return notes

    def as_dict(self) -> dict:
        return {
            "outputs": [_stream_dict(s) for s in self.outputs],
            "duplicate_output": {
                s: {str(r): len(lines) for r, lines in ranks.items()}
                for s, ranks in self.duplicates.items()
            },
            "files": None
            if self.files is None
            else {
                "written_by_original": self.files.written,
                "written_twice": self.files.duplicates,
                "missing": self.files.missing,
                "checkpoints": self.files.checkpoints,
                "trackers": [_stream_dict(s) for s in self.files.trackers],
            },
            "samples": None
            if self.shares is None
            else {
                "original": self.shares.original,
                "per_rank": self.shares.per_rank,
                "problem": self.shares.problem,
            },
            "ending": None if self.ending is None else vars(self.ending),
            "launches": [
                {
                    "label": launch.label,
                    "how": launch.how,
                    "ending": vars(launch.ending),
                    "seconds": round(launch.seconds, 3),
                }
                for launch in self.launches
            ],
            "launches_not_judged": self.launches_not_judged,
        }


def _stream_dict(stream: StreamComparison) -> dict:
    return {
        "stream": stream.stream,
        "compared": stream.compared,
        "differences": [vars(d) for d in stream.differences],
        "per_process": stream.per_process,
        "missing": len(stream.missing),
    }


def _output_cause(stream: StreamComparison) -> Cause:
    first = stream.differences[0]
    more = len(stream.differences) - 1
    where = (
        "what the main process prints"
        if stream.stream == "stdout"
        else ("what the main process logs" if stream.stream == "log" else stream.stream)
    )
    message = f"{where} differs from the original's: {first.sentence()}"
    if more:
        message += f"; and {more} more number{'s' if more > 1 else ''}"
    return Cause("output" if stream.stream in STREAMS else "tracker", message, _OUTPUT_REMEDY)


@dataclass
class Run:
    """One recorded run as the checks read it."""

    record: RunRecord
    run_dir: Path
    sandbox: Path | None


def compare_checks(
    original: Run, migrated: Run, nproc: int, *, rtol: float, atol: float, probe: Run | None
) -> Checks:
    """A migrated run that did not finish is compared on what it did: what it did not get to
    write or show is not named (its end is), nor the samples of ranks stopped from outside."""
    checks = Checks()
    finished = all(rank.finished for rank in migrated.record.ranks)
    losses = Losses(original.record.ranks[0].step_losses, migrated.record.ranks[0].step_losses)
    for stream in STREAMS:
        ours = read_capture(original.run_dir, stream, 0)
        per_rank = [read_capture(migrated.run_dir, stream, r) for r in range(nproc)]
        would_print = [read_capture(migrated.run_dir, "print", r) for r in range(nproc)]
        probe_lines: list[Line] | None = (
            read_capture(probe.run_dir, stream, 0) if probe is not None else None
        )
        if ours or per_rank[0]:
            checks.outputs.append(
                compare_stream(
                    stream,
                    ours,
                    per_rank[0],
                    rtol=rtol,
                    atol=atol,
                    losses=losses,
                    would_print=would_print if nproc > 1 else None,
                    probe=probe_lines,
                )
            )
        extra = duplicates(per_rank)
        if extra:
            checks.duplicates[stream] = extra
    checks.files = compare_files(
        RunFiles(original.record, original.run_dir, original.sandbox),
        RunFiles(migrated.record, migrated.run_dir, migrated.sandbox),
        rtol=rtol,
        atol=atol,
        losses=losses,
    )
    if not finished:
        checks.files.missing = []
        for stream in checks.outputs:
            stream.missing = []
    if all(rank.status != "killed" for rank in migrated.record.ranks):
        checks.shares = compare_shares(original.record, migrated.record, nproc)
    return checks


_ENDING_REMEDY = {
    "crashed": "fix the line named (the original runs past it); `migrate launch` runs the "
    "migrated program alone with the full traceback",
    "exited": "see why the migrated program exits where the original does not",
    "hung": "every process must take part in each collective (gather, reduce, a prepared "
    "model's forward and backward): call them outside `if accelerator.is_main_process:`",
    "timed-out": "raise --timeout, or compare a shorter run with --max-steps",
    "failed": "run the migrated program with `migrate launch` to see its error",
}
_SHARES_REMEDY = (
    "every training loader goes through accelerator.prepare once, and nothing else shards it"
)
_OUTPUT_REMEDY = (
    "a number computed from each process's share must be reduced or gathered consistently, "
    "numerator and denominator alike (accelerator.gather_for_metrics on predictions and "
    "targets, accelerator.reduce on sums and counts)"
)
_FILE_REMEDY = "write it under `if accelerator.is_main_process:` (or accelerator.save)"
_CHECKPOINT_REMEDY = (
    "save what the original saved: accelerator.unwrap_model(model).state_dict() is the "
    "original model's; keep or strip a `module.` prefix as the original's checkpoints have it"
)
_MISSING_REMEDY = "write it on the main process, as the original writes it"
_LAUNCH_REMEDY = "the migrated program must run as users launch it, on 1 process and on N"
