"""The verdict from the per-step judgement and the other checks, on hand-made records."""

from __future__ import annotations

from array import array

from migrator.verify.checks import Checks
from migrator.verify.ending import Ending
from migrator.verify.files import FileComparison
from migrator.verify.judge import judge_steps, outcome
from migrator.verify.records import Parameter, RankRecord, RunRecord
from migrator.verify.shares import Shares
from migrator.verify.verdict import Settings

SETTINGS = Settings("train.py", 2, "cpu", "runtime", 1e-5, 1e-6, None, False)


def run(*per_rank: list[float], weights=(1.0, 2.0)) -> RunRecord:
    ranks = [
        RankRecord(i, "completed", list(losses), [0.1] * len(losses), len(losses), [], {})
        for i, losses in enumerate(per_rank)
    ]
    initial = array("d", [0.0, 0.0])
    return RunRecord(ranks, [Parameter("w", [2], array("d", weights), initial)])


def judged(original, migrated):
    return judge_steps(original, migrated, SETTINGS, summed_at=(), run_probe=lambda: None)


def test_agreeing_steps_and_checks_are_equivalent():
    result = outcome(judged(run([1.0, 0.5]), run([1.0, 0.5], [1.0, 0.5])), Checks(), SETTINGS, [])
    assert result.verdict == "EQUIVALENT" and result.exit_code == 0


def test_a_crash_after_the_steps_it_made_agree_is_the_verdicts_cause():
    migrated = run([1.0], [1.0])
    migrated.parameters = None  # it crashed before saving them
    checks = Checks(ending=Ending("crashed", "crashed on rank 1 after 1 optimizer steps: X", 1))
    result = outcome(judged(run([1.0, 0.5]), migrated), checks, SETTINGS, [])
    assert result.verdict == "DIVERGED" and result.step is None
    assert result.headline == (
        "DIVERGED: the migrated run crashed on rank 1 after 1 optimizer steps: X "
        "(the original made 2 optimizer steps and finished)"
    )
    assert result.causes[0].code == "crashed"
    assert "steps" not in [cause.code for cause in result.causes]


def test_a_problem_beyond_the_steps_makes_agreeing_runs_diverge_without_a_step():
    files = FileComparison(written=1, duplicates=["model.pt is written by 2 processes"])
    result = outcome(judged(run([1.0]), run([1.0], [1.0])), Checks(files=files), SETTINGS, [])
    assert result.verdict == "DIVERGED" and result.step is None and result.exit_code == 1
    assert result.reason.startswith("model.pt is written by 2 processes (losses, learning rates")
    assert [cause.code for cause in result.causes] == ["file-written-twice"]


def test_doubly_sharded_data_comes_first_when_the_steps_differ():
    shares = Shares(16, [4, 4], problem="the training data is sharded twice", code="sharded-twice")
    result = outcome(
        judged(run([1.0, 0.5]), run([2.0], [2.0])), Checks(shares=shares), SETTINGS, []
    )
    assert result.verdict == "DIVERGED" and result.step == 1
    assert result.causes[0].code == "sharded-twice"
    assert result.reason.endswith("likely cause: sharded-twice")
