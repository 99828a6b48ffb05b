"""Acceptance bench: does the migrator migrate each fixtures/acceptance case correctly?

For each case: (1) the expert's hand migration (`expert/`) is run through the checks of
`acceptance_checks.py` against the original, which validates the case itself; (2) a copy of
`original/` is migrated in place with `python -m migrator --write --no-cache .` from the
checkout given by `--migrator`; (3) if that changed anything, the migrated copy is run through
the same checks. Verdicts: correct, wrong (the first failed check named), refused (unchanged,
exit 1 and a finding), silent (unchanged without one), error (the migrator failed).

    python benchmarks/acceptance.py [--migrator /work/main] [--case NAME ...] [-j N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))

from acceptance_checks import check_migration, run_original

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "fixtures" / "acceptance"
FINDING = re.compile(
    r"^(?P<path>\S+?):\d+:\d+: (?P<code>MIG\d+)\b(?: \((?P<level>\w+)\))? ?(?P<text>.*)$"
)
MIGRATE_TIMEOUT = 300


@dataclass
class Case:
    name: str
    folder: Path
    entry: str
    args: list[str]
    expected: str
    description: str

    @classmethod
    def load(cls, folder: Path) -> Case:
        meta = tomllib.loads((folder / "case.toml").read_text())
        return cls(
            name=folder.name,
            folder=folder,
            entry=meta.get("entry", "train.py"),
            args=[str(a) for a in meta.get("args", [])],
            expected=meta["expected"],
            description=meta["description"],
        )


@dataclass
class Outcome:
    case: str
    expected: str
    expert: str = "n/a"  # pass / fail / n/a (a refusal case has no expert migration)
    expert_failures: list[str] = field(default_factory=list)
    verdict: str = ""  # correct / wrong / refused / silent / error / not run
    label: str = ""  # the verdict against `expected`
    failures: list[str] = field(default_factory=list)
    migrate_exit: int | None = None
    findings: list[str] = field(default_factory=list)
    seconds: float = 0.0


def all_cases() -> list[Case]:
    return [Case.load(d) for d in sorted(CASES.iterdir()) if (d / "case.toml").is_file()]


def migrate_copy(case: Case, checkout: Path, destination: Path) -> tuple[bool, int, list[str]]:
    """Migrates a copy of `original/` in place; says whether it changed, the exit, the findings."""
    shutil.copytree(case.folder / "original", destination)
    before = {p: p.read_bytes() for p in destination.rglob("*") if p.is_file()}
    process = subprocess.run(
        [sys.executable, "-m", "migrator", "--write", "--no-cache", "."],
        check=False,
        cwd=destination,
        env={**_clean_env(), "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        timeout=MIGRATE_TIMEOUT,
    )
    after = {p: p.read_bytes() for p in destination.rglob("*") if p.is_file()}
    findings = [line for line in process.stderr.splitlines() if FINDING.match(line)]
    if process.returncode == 2 and not findings:
        findings = process.stderr.strip().splitlines()[-1:]
    return before != after, process.returncode, findings


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MIGRATE_")}


def judge_case(
    case: Case, checkout: Path, timeout: float, run_expert: bool, run_migrator: bool = True
) -> Outcome:
    started = time.perf_counter()
    outcome = Outcome(case.name, case.expected)
    original = run_original(case.folder / "original", case.entry, case.args, checkout, timeout)
    if original.returncode != 0:
        outcome.verdict = outcome.label = "broken case"
        outcome.failures = [f"original: exit {original.returncode}: {original.last_error_line()}"]
        return outcome
    expert = case.folder / "expert"
    if run_expert and expert.is_dir():
        report = check_migration(original, expert, case.entry, case.args, checkout, timeout)
        outcome.expert = "pass" if report.passed else "fail"
        outcome.expert_failures = report.failures
    if not run_migrator:
        outcome.verdict = outcome.label = "not run"
        outcome.seconds = round(time.perf_counter() - started, 1)
        return outcome
    with tempfile.TemporaryDirectory(prefix="acceptance-migrate-") as scratch:
        migrated = Path(scratch) / "program"
        changed, outcome.migrate_exit, outcome.findings = migrate_copy(case, checkout, migrated)
        if outcome.migrate_exit == 2:
            outcome.verdict = "error"
        elif changed:
            report = check_migration(original, migrated, case.entry, case.args, checkout, timeout)
            outcome.verdict = "correct" if report.passed else "wrong"
            outcome.failures = report.failures
        elif outcome.migrate_exit == 1 and outcome.findings:
            outcome.verdict = "refused"
        else:
            outcome.verdict = "silent"
    outcome.label = label(outcome.verdict, case.expected)
    outcome.seconds = round(time.perf_counter() - started, 1)
    return outcome


def label(verdict: str, expected: str) -> str:
    if verdict == "refused":
        return "refused-as-expected" if expected == "refuse" else "refused-over-cautious"
    if verdict == "correct" and expected == "refuse":
        return "correct (expected a refusal)"
    return verdict


def print_table(outcomes: list[Outcome]) -> None:
    width = max(len(o.case) for o in outcomes)
    print(f"{'case':<{width}}  expected  expert  verdict                 first failure / finding")
    for o in outcomes:
        detail = (o.failures or o.expert_failures or o.findings or [""])[0]
        print(f"{o.case:<{width}}  {o.expected:<8}  {o.expert:<6}  {o.label:<22}  {detail}")
    counts = {key: sum(o.label == key for o in outcomes) for key in SUMMARY_KEYS}
    experts = [o for o in outcomes if o.expert != "n/a"]
    print(
        ", ".join(f"{n} {key}" for key, n in counts.items())
        + f"; expert migrations passing: {sum(o.expert == 'pass' for o in experts)}/{len(experts)}"
    )


SUMMARY_KEYS = (
    "correct",
    "wrong",
    "refused-as-expected",
    "refused-over-cautious",
    "silent",
    "error",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--migrator", type=Path, default=Path("/work/main"), help="checkout")
    parser.add_argument("--case", action="append", default=[], help="run only this case")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="cases run concurrently")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--json-out", type=Path, help="also write the JSON document to this file")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per program run")
    parser.add_argument("--skip-expert", action="store_true", help="do not re-check the experts")
    parser.add_argument(
        "--expert-only", action="store_true", help="check the expert migrations, not the migrator"
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    checkout = args.migrator.resolve()
    if not (checkout / "migrator").is_dir() or not (checkout / "runtime").is_dir():
        print(f"{checkout}: not a checkout with migrator/ and runtime/", file=sys.stderr)
        return 2
    cases = all_cases()
    if args.list:
        for case in cases:
            print(f"{case.name:<32} {case.expected:<8} {case.description}")
        return 0
    if args.case:
        unknown = set(args.case) - {c.name for c in cases}
        if unknown:
            print(f"unknown case(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.name in args.case]

    def judge(case: Case) -> Outcome:
        outcome = judge_case(
            case, checkout, args.timeout, not args.skip_expert, not args.expert_only
        )
        if not args.json:
            print(f"{case.name}: {outcome.label} ({outcome.seconds}s)", file=sys.stderr)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(judge, cases))
    document = [asdict(o) for o in outcomes]
    if args.json_out:
        args.json_out.write_text(json.dumps(document, indent=2) + "\n")
    if args.json:
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        print_table(outcomes)
        for o in outcomes:
            for failure in o.failures + [f"expert {f}" for f in o.expert_failures]:
                print(f"  {o.case}: {failure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
