"""The checks a migrated program must pass against its original (the acceptance bar of issue 26).

- `split2`: 2 processes, `MIGRATE_SPLIT_BATCHES=1`: the main process prints the original's
  numbers, line by line; no other process prints; each file the original writes is written by
  the main process alone.
- `single`: 1 process: the original's numbers and files.
- `nosplit2`: 2 processes as users launch them: finishes, keeps the original's learning rates
  (the numbers after `lr`), no other process prints, each file written by the main process alone.
In every run, a folder made by several processes without `exist_ok` is a race. In `split2`, each
process must run its models on about half the samples the original did: more means a loader left
unsharded (N replicas) or inputs gathered and run through the model again (N× the work).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from acceptance_runs import Launch, RunResult, learning_rates, numbered_lines, run_program

RTOL = 1e-4
ATOL = 1e-5
WORK_SLACK = 1.05  # a process may do 5% (+ a few samples, e.g. a summary's dummy batch) over 1/N
WORK_SLACK_ROWS = 8
ORIGINAL = Launch("original", 1)
CANDIDATE_LAUNCHES = (
    Launch("split2", 2, split_batches=True),
    Launch("single", 1),
    Launch("nosplit2", 2),
)


@dataclass
class CheckReport:
    failures: list[str] = field(default_factory=list)  # "<launch>: <what went wrong>"
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.failures


def close(a: float, b: float) -> bool:
    return abs(a - b) <= ATOL + RTOL * abs(b)


def compare_numbers(expected: list[list[float]], got: list[list[float]]) -> str | None:
    for index, (want, have) in enumerate(zip(expected, got)):
        if len(want) != len(have) or not all(close(h, w) for h, w in zip(have, want)):
            return f"numbers differ on numbered line {index + 1}: expected {want}, got {have}"
    if len(expected) != len(got):
        return f"{len(got)} numbered lines printed, the original printed {len(expected)}"
    return None


def compare_rates(expected: list[float], got: list[float]) -> str | None:
    if len(expected) != len(got) or not all(close(h, w) for h, w in zip(got, expected)):
        return f"learning rates {got[:8]}… differ from the original's {expected[:8]}…"
    return None


def file_failures(original: RunResult, run: RunResult) -> list[str]:
    problems = []
    for path in sorted(original.writers):
        ranks = run.writers.get(path, set())
        if not ranks:
            problems.append(f"{path} is not written")
        elif ranks != {"0"}:
            problems.append(f"{path} written by ranks {','.join(sorted(ranks))}")
    for path in sorted(set(run.writers) - set(original.writers)):
        if len(run.writers[path]) > 1:
            problems.append(f"{path} (new) written by ranks {','.join(sorted(run.writers[path]))}")
    for folder, makers in sorted(run.folder_makers.items()):
        ranks = {rank for rank, _ in makers}
        if len(ranks) > 1 and not all(exist_ok for _, exist_ok in makers):
            problems.append(f"folder {folder} made by ranks {','.join(sorted(ranks))} racing")
    return problems


def work_failures(original: RunResult, run: RunResult) -> list[str]:
    total = sum(original.model_rows.values())
    share = total / run.launch.nproc * WORK_SLACK + WORK_SLACK_ROWS
    return [
        f"rank {rank} ran its models on {rows} samples, the original on {total} in all "
        f"(each of {run.launch.nproc} processes should take about 1/{run.launch.nproc}: "
        "a loader not sharded, or inputs gathered and run again)"
        for rank, rows in sorted(run.model_rows.items())
        if rank != "launcher" and rows > share
    ]


def judge_run(original: RunResult, run: RunResult, timeout: float) -> list[str]:
    name = run.launch.name
    if run.timed_out:
        return [f"{name}: hang (no exit within {timeout:.0f}s)"]
    if run.returncode != 0:
        return [f"{name}: exit {run.returncode}: {run.last_error_line()}"]
    problems = []
    if name == "nosplit2":
        problem = compare_rates(learning_rates(original.main_lines), learning_rates(run.main_lines))
    else:
        expected = numbered_lines(original.main_lines)
        problem = compare_numbers(expected, numbered_lines(run.main_lines))
    if problem:
        problems.append(problem)
    if run.other_lines:
        rank, line = run.other_lines[0]
        problems.append(f"{len(run.other_lines)} lines printed by other ranks ({rank}: {line!r})")
    if name == "split2":
        problems.extend(work_failures(original, run))
    problems.extend(file_failures(original, run))
    return [f"{name}: {problem}" for problem in problems]


def run_original(program: Path, entry: str, args: list[str], checkout: Path, timeout: float):
    return run_program(program, entry, args, ORIGINAL, checkout, timeout)


def check_migration(
    original: RunResult,
    migrated: Path,
    entry: str,
    args: list[str],
    checkout: Path,
    timeout: float,
) -> CheckReport:
    report = CheckReport()
    for launch in CANDIDATE_LAUNCHES:
        run = run_program(migrated, entry, args, launch, checkout, timeout)
        report.seconds[launch.name] = round(run.seconds, 2)
        report.failures.extend(judge_run(original, run, timeout))
    return report
