"""What one recorded run leaves on disk, and reading it back without torch.

Each process of a run writes `rank<R>.json` (losses, learning rates, what it observed, the
files it wrote, the traceback that ended it) into the run's folder, and along the way its
step log, what it showed (`capture.py`), its heartbeat and what it saved (`checkpoints.py`); rank 0 also writes the final parameters as float64 `params.bin` with their names
and shapes in `params.json`, and their values before the first optimizer step in
`params_initial.bin` (NaN where unknown). The parent process reads these with the standard library only.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_ENV = "MIGRATE_VERIFY_CONFIG"
PARAMS_DATA = "params.bin"
PARAMS_LAYOUT = "params.json"
PARAMS_INITIAL = "params_initial.bin"


def rank_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank{rank}.json"


def capture_file(run_dir: Path, stream: str, rank: int) -> Path:
    """stdout | log | print: JSON lines {"step", "text"} (capture.py)."""
    return run_dir / f"{stream}{rank}.jsonl"


def steps_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank{rank}.steps"


def beat_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"beat{rank}"


def stack_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"stack{rank}.txt"


def done_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"done{rank}"


def saves_folder(run_dir: Path, rank: int) -> Path:
    """What torch.save saved on this rank, one JSON + float64 file pair per path."""
    return run_dir / "saves" / f"rank{rank}"


@dataclass
class Parameter:
    name: str
    shape: list[int]
    values: array  # float64, flattened
    initial: array | None = None  # before the first optimizer step; NaN where unknown


@dataclass
class RankRecord:
    rank: int
    # completed | stopped (reached --max-steps) | crashed | exited | killed (stopped from
    # outside before it could write its record: what it did comes from its step log)
    status: str
    step_losses: list[float]  # per optimizer step: sum of the values passed to backward
    step_lrs: list[float | None]
    backward_calls: int
    trailing_losses: list[float]  # backward calls after the last optimizer step
    observed: dict  # dropout, batchnorm, loaders, ... (see hooks.Observations)
    error: str | None = None  # the exception that ended the script, if any
    frames: list[dict] = field(default_factory=list)  # its traceback, innermost last
    writes: list[dict] = field(default_factory=list)  # files and folders written (writes.py)
    max_quiet_s: float = 0.0  # the longest time between two heartbeats (liveness.py)

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "stopped")


@dataclass
class RunRecord:
    ranks: list[RankRecord] = field(default_factory=list)
    parameters: list[Parameter] | None = None

    @property
    def steps(self) -> int:
        return len(self.ranks[0].step_losses) if self.ranks else 0

    def mean_losses(self) -> list[float]:
        """Per-step loss, the mean over ranks (each rank's loss is its share's mean)."""
        count = min(len(r.step_losses) for r in self.ranks)
        return [sum(r.step_losses[i] for r in self.ranks) / len(self.ranks) for i in range(count)]

    @property
    def observed(self) -> dict:
        return self.ranks[0].observed if self.ranks else {}


def read_rank(path: Path) -> RankRecord:
    data = json.loads(path.read_text())
    return RankRecord(
        rank=data["rank"],
        status=data["status"],
        step_losses=[float(v) for v in data["step_losses"]],
        step_lrs=data["step_lrs"],
        backward_calls=data["backward_calls"],
        trailing_losses=data["trailing_losses"],
        observed=data["observed"],
        error=data.get("error"),
        frames=data.get("frames", []),
        writes=data.get("writes", []),
        max_quiet_s=data.get("max_quiet_s") or 0.0,
    )


def read_step_log(run_dir: Path, rank: int) -> RankRecord:
    """A rank that left no record: its steps from the step log, flushed at every step."""
    losses, lrs = [], []
    try:
        lines = steps_file(run_dir, rank).read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        loss, _, lr = line.partition(" ")
        try:
            losses.append(float(loss))
            lrs.append(None if lr in ("None", "") else float(lr))
        except ValueError:
            break  # the line being written when the process stopped
    return RankRecord(rank, "killed", losses, lrs, 0, [], {})


def read_parameters(run_dir: Path) -> list[Parameter] | None:
    layout_path = run_dir / PARAMS_LAYOUT
    if not layout_path.exists():
        return None
    layout = json.loads(layout_path.read_text())
    values = array("d")
    values.frombytes((run_dir / PARAMS_DATA).read_bytes())
    initial = None
    if (run_dir / PARAMS_INITIAL).exists():
        initial = array("d")
        initial.frombytes((run_dir / PARAMS_INITIAL).read_bytes())
    parameters, offset = [], 0
    for entry in layout:
        end = offset + entry["numel"]
        parameters.append(
            Parameter(
                entry["name"],
                entry["shape"],
                values[offset:end],
                initial[offset:end] if initial is not None else None,
            )
        )
        offset = end
    return parameters


def read_run(run_dir: Path, nproc: int, *, partial: bool = False) -> RunRecord:
    """Every rank's record; raises FileNotFoundError naming the first missing rank, unless
    `partial`: then a rank without a record is read from its step log (status killed)."""
    ranks = []
    for rank in range(nproc):
        path = rank_file(run_dir, rank)
        if path.exists():
            ranks.append(read_rank(path))
        elif partial:
            ranks.append(read_step_log(run_dir, rank))
        else:
            raise FileNotFoundError(f"rank {rank} wrote no record")
    return RunRecord(ranks=ranks, parameters=read_parameters(run_dir))
