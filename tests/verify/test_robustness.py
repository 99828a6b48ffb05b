"""Scripts that crash, hang or need arguments; output formats; what verify leaves behind."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.verify.conftest import ROOT, SCRIPTS, needs_runtime, verify, verify_json

pytestmark = [needs_runtime, pytest.mark.slow]


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            pass
    return found


def test_crashing_script_could_not_run_with_both_stderr_tails():
    report, result = verify_json("crashes_after_two_steps.py", "--nproc", "2")
    assert result.returncode == 2
    assert report["verdict"] == "COULD NOT RUN"
    assert "after 2 optimizer steps: KeyError: 'input'" in report["reason"]
    assert "KeyError: 'input'" in report["runs"]["original"]["stderr_tail"]
    assert "KeyError: 'input'" in report["runs"]["migrated"]["stderr_tail"]
    assert "--- original run: stderr" in result.stderr


def test_hanging_script_is_stopped_at_the_timeout_and_killed(tmp_path):
    result = verify("hangs_in_training.py", "--nproc", "2", "--timeout", "15", tmp_dir=tmp_path)
    assert result.returncode == 2
    assert "time limit" in result.stdout
    assert _processes_mentioning(str(tmp_path)) == []


def test_missing_required_argument_shows_the_scripts_usage_error():
    result = verify("argparse_main.py", "--nproc", "2")
    assert result.returncode == 2
    assert "the following arguments are required: --epochs" in result.stderr


def test_temporary_files_are_removed_and_the_script_is_untouched(tmp_path):
    # from the repository root: the runs' mirrors of a real project folder go too
    script = SCRIPTS / "mlp_regression.py"
    before = hashlib.sha256(script.read_bytes()).hexdigest()
    result = verify(
        "mlp_regression.py", "--nproc", "2", "--max-steps", "2", tmp_dir=tmp_path, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []
    assert hashlib.sha256(script.read_bytes()).hexdigest() == before


def test_json_carries_the_per_step_series_and_the_verdict():
    report, result = verify_json("train_eval_accuracy.py", "--nproc", "2", "--max-steps", "5")
    assert result.returncode == 0
    assert report["verdict"] == "EQUIVALENT" and report["exit_code"] == 0
    steps = report["steps"]
    assert [row["step"] for row in steps] == [1, 2, 3, 4, 5]
    for row in steps:
        assert abs(row["original"] - row["migrated"]) == pytest.approx(row["abs_diff"])
        assert len(row["per_rank"]) == 2
        assert sum(row["per_rank"]) / 2 == pytest.approx(row["migrated"])
    assert report["weights"]["tensors"] == 4
    # 20 steps in all: the tail after step 5 was not run, and the report says so
    assert any(note.startswith("--max-steps 5: both runs stopped") for note in report["notes"])
    assert report["checks"]["samples"]["per_rank"] == [60, 60]  # 5 steps of 24, split in two


def test_text_report_has_a_table_a_verdict_line_and_the_cause():
    result = verify("dropout_mlp.py", "--nproc", "2", "--max-steps", "3")
    assert result.returncode == 1
    header = next(line for line in result.stdout.splitlines() if "original" in line)
    assert "step" in header and "migrated" in header and "|Δ|" in header
    verdict = result.stdout.strip().splitlines()[-1]
    assert verdict.startswith("DIVERGED at step 1:") and "likely cause: dropout" in verdict
    assert "likely cause (dropout)" in result.stderr and "--no-dropout" in result.stderr


def test_script_with_nothing_to_migrate_is_not_comparable(tmp_path):
    script = tmp_path / "no_training.py"
    script.write_text("print('hello')\n")
    result = subprocess.run(
        [sys.executable, "-m", "migrator", "verify", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # the original starts at once, in a mirror of this folder
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "NOT COMPARABLE" in result.stdout


def test_missing_script_is_an_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "migrator", "verify", str(tmp_path / "absent.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "no such file" in result.stdout + result.stderr


def test_importing_the_cli_and_verify_orchestration_does_not_import_torch():
    code = (
        "import sys, migrator.cli, migrator.verify.orchestrate, migrator.verify.report; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)
