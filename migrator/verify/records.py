"""What one recorded run leaves on disk, and reading it back without torch.

Each process of a run writes `rank<R>.json` (losses, learning rates, what it observed) into the
run's folder; rank 0 also writes the final parameters as float64 `params.bin` with their names
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


@dataclass
class Parameter:
    name: str
    shape: list[int]
    values: array  # float64, flattened
    initial: array | None = None  # before the first optimizer step; NaN where unknown


@dataclass
class RankRecord:
    rank: int
    status: str  # completed | stopped (reached --max-steps) | crashed | exited
    step_losses: list[float]  # per optimizer step: sum of the values passed to backward
    step_lrs: list[float | None]
    backward_calls: int
    trailing_losses: list[float]  # backward calls after the last optimizer step
    observed: dict  # dropout, batchnorm, loaders, ... (see hooks.Observations)
    error: str | None = None  # the exception that ended the script, if any


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
    )


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


def read_run(run_dir: Path, nproc: int) -> RunRecord:
    """Every rank's record; raises FileNotFoundError naming the first missing rank."""
    ranks = []
    for rank in range(nproc):
        path = rank_file(run_dir, rank)
        if not path.exists():
            raise FileNotFoundError(f"rank {rank} wrote no record")
        ranks.append(read_rank(path))
    return RunRecord(ranks=ranks, parameters=read_parameters(run_dir))
