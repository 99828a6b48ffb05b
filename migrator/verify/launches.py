"""The migrated program launched as users launch it, beside the compared run: on 1 process
(`python train.py`) and on N processes without split batches (`migrate launch --nproc N`,
each process taking whole batches). Each must get to the end: a per-step scheduler sized on
the unsharded loader crashes at step total/N only there, code written for N processes can
fail on one, and an evaluation on the main process alone can deadlock.

They are bounded by `--max-steps` like the compared runs, start with them when the machine
has a core for every process (else after them), and are not judged (stopped, or never
started) when the comparison already says DIVERGED.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from migrator.verify.ending import Ending, describe
from migrator.verify.records import read_run
from migrator.verify.runs import RunResult, RunSpec, StartedRun, finish, start, stop_everything

ONE_PROCESS = "one-process"
AS_LAUNCHED = "as-launched"


@dataclass
class LaunchResult:
    label: str
    how: str  # the command, in the user's words
    ending: Ending
    seconds: float

    @property
    def problem(self) -> str | None:
        if self.ending.finished:
            return None
        return (
            f"launched as users launch it ({self.how}), the migrated program {self.ending.message}"
        )


def start_launches(migrated: RunSpec, work_dir: Path) -> list[StartedRun]:
    """Both launches of the migrated spec (which runs N processes with split batches)."""
    # on the device of the migrated run: `python train.py` on a GPU machine uses the GPU
    specs = [replace(migrated, label=ONE_PROCESS, nproc=None)]
    if (migrated.nproc or 1) > 1:
        specs.append(replace(migrated, label=AS_LAUNCHED, split_batches=False))
    return [start(spec, work_dir) for spec in specs]


def how(spec: RunSpec, script_name: str) -> str:
    if spec.nproc is None:
        return f"python {script_name}, 1 process"
    launcher = "migrate launch" if spec.runtime == "runtime" else "accelerate launch"
    return f"{launcher} --nproc {spec.nproc} {script_name}, split_batches=False"


def finish_launches(
    launches: list[StartedRun], deadline: float, stall_s: float, script_name: str
) -> tuple[list[LaunchResult], list[RunResult]]:
    results, runs = [], []
    for run in launches:
        result = finish(run, deadline, stall_s, watching=tuple(launches))
        runs.append(result)
        nproc = run.spec.processes
        record = None
        try:
            record = read_run(result.run_dir, nproc, partial=True)
        except (OSError, ValueError, KeyError):
            pass
        results.append(
            LaunchResult(
                run.spec.label,
                how(run.spec, script_name),
                describe(result, record, nproc),
                result.seconds,
            )
        )
    return results, runs


def stop_launches(launches: list[StartedRun]) -> None:
    for run in launches:
        stop_everything(run.process, run.pid_dir)
