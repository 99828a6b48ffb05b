"""The report's row selection and JSON shape (hand-made outcomes)."""

from __future__ import annotations

import json

from migrator.verify.compare import Comparison, StepRow, WeightsComparison
from migrator.verify.report import outcome_as_dict, shown_rows
from migrator.verify.verdict import DIVERGED, Outcome, Settings


def rows(count):
    return [StepRow(i + 1, 1.0, 1.0 + i, [1.0 + i], 0.1, 0.1) for i in range(count)]


def test_short_series_are_shown_whole():
    assert [row.step for row in shown_rows(rows(5), None)] == [1, 2, 3, 4, 5]


def test_long_series_keep_the_start_the_divergence_and_the_end():
    shown = shown_rows(rows(100), 50)
    steps = [row.step if row else None for row in shown]
    assert steps[:8] == list(range(1, 9))
    assert None in steps
    assert 50 in steps and 47 in steps and 53 in steps
    assert steps[-4:] == [97, 98, 99, 100]


def test_json_outcome_has_the_series_the_step_and_the_exit_code():
    comparison = Comparison(rows(3), 2, None, None, WeightsComparison(tensors=1, elements=2), 2.0)
    settings = Settings("train.py", 2, "cpu", "runtime", 1e-5, 1e-6, None, False)
    outcome = Outcome(DIVERGED, "loss differs", settings, comparison)
    data = json.loads(json.dumps(outcome_as_dict(outcome)))
    assert data["verdict"] == "DIVERGED" and data["exit_code"] == 1 and data["step"] == 2
    assert [row["migrated"] for row in data["steps"]] == [1.0, 2.0, 3.0]
