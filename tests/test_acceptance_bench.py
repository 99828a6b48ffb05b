"""benchmarks/acceptance.py: its checks pass expert migrations and catch an unmigrated program."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
CASES = REPO / "fixtures" / "acceptance"


@pytest.mark.slow
def test_expert_migrations_pass_and_the_unmigrated_program_fails(tmp_path):
    cases = ["metric_ratio", "entry_without_backward"]
    selection = [arg for case in cases for arg in ("--case", case)]
    command = [sys.executable, str(BENCH / "acceptance.py"), "--migrator", str(REPO)]
    finished = subprocess.run(
        [*command, "--expert-only", "--json", "-j", "2", *selection],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    outcomes = {o["case"]: o for o in json.loads(finished.stdout)}
    assert sorted(outcomes) == sorted(cases)
    for case in cases:
        assert outcomes[case]["expert"] == "pass", outcomes[case]["expert_failures"]

    # the same checks reject the plain program launched on 2 processes: every rank prints
    sys.path.insert(0, str(BENCH))
    try:
        from acceptance_checks import judge_run, run_original
        from acceptance_runs import Launch, run_program
    finally:
        sys.path.remove(str(BENCH))
    original = CASES / "metric_ratio" / "original"
    baseline = run_original(original, "train.py", [], REPO, 120)
    plain = run_program(original, "train.py", [], Launch("split2", 2, True), REPO, 120)
    failures = judge_run(baseline, plain, 120)
    assert any("printed by other ranks" in failure for failure in failures), failures
