"""The outcome of a verify run: a verdict, its exit code, and everything the report shows."""

from __future__ import annotations

from dataclasses import dataclass, field

from migrator.exit_codes import EXIT_CHANGES, EXIT_ERROR, EXIT_OK
from migrator.verify.causes import Cause
from migrator.verify.checks import Checks
from migrator.verify.compare import Comparison
from migrator.verify.probe import ProbeResult
from migrator.verify.runs import RunResult

EQUIVALENT = "EQUIVALENT"
DIVERGED = "DIVERGED"
NOT_COMPARABLE = "NOT COMPARABLE"
COULD_NOT_RUN = "COULD NOT RUN"

EXIT_CODES = {
    EQUIVALENT: EXIT_OK,
    DIVERGED: EXIT_CHANGES,
    NOT_COMPARABLE: EXIT_ERROR,
    COULD_NOT_RUN: EXIT_ERROR,
}


@dataclass
class Settings:
    script: str
    nproc: int
    device: str
    runtime: str
    rtol: float
    atol: float
    max_steps: int | None
    no_dropout: bool
    against: str | None = None  # the migration judged, when made elsewhere


@dataclass
class Outcome:
    verdict: str
    reason: str
    settings: Settings
    comparison: Comparison | None = None
    causes: list[Cause] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # migration findings left for a human
    probe: ProbeResult | None = None  # the rounding probe, when one ran
    checks: Checks | None = None  # outputs, files, shares, ends, other launches
    # DIVERGED on the per-step series (the step is named), not on another check
    on_steps: bool = True

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def step(self) -> int | None:
        if self.verdict != DIVERGED or not self.on_steps or self.comparison is None:
            return None
        return self.comparison.divergence_step

    @property
    def headline(self) -> str:
        if self.step is not None:
            return f"DIVERGED at step {self.step}: {self.reason}"
        return f"{self.verdict}: {self.reason}"
