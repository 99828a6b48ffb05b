"""`migrate verify ORIGINAL --against MIGRATION` on migrations made elsewhere: each program of
fixtures/migrations comes with a wrong migration (as the tool made them before the soundness
work) and a right one (by hand). The right one is EQUIVALENT; the wrong one DIVERGED with a
cause that names its defect. One verify run per migration, every assertion on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.verify.conftest import ROOT, RUN_LIMIT_S, needs_runtime

pytestmark = [needs_runtime, pytest.mark.slow]

MIGRATIONS = ROOT / "fixtures" / "migrations"
PROGRAMS = [
    "accuracy",
    "checkpoint",
    "csv_log",
    "logging_handlers",
    "main_only_eval",
    "module_prefix",
    "one_process",
    "sharded_twice",
    "step_schedule",
    "tensorboard",
    "test_loss",
    "unshared_data",
]


def verify_against(program: str, which: str) -> tuple[dict, subprocess.CompletedProcess]:
    folder = MIGRATIONS / program
    if (folder / "original").is_dir():  # a program of several files, given as a folder
        original, migration = folder / "original" / "train.py", folder / which
    else:
        original, migration = folder / "original.py", folder / f"{which}.py"
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    command = [
        sys.executable,
        "-m",
        "migrator",
        "verify",
        str(original),
        "--nproc",
        "2",
        "--against",
        str(migration),
        "--format",
        "json",
    ]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    # from the program's folder, as its user would: each run mirrors the current folder, and
    # mirroring the repository root cost seconds per verify (tests/verify/conftest.py)
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=folder, check=False,
        timeout=RUN_LIMIT_S,
    )  # fmt: skip
    return json.loads(result.stdout), result


def causes(report: dict) -> list[tuple[str, str]]:
    return [(cause["code"], cause["message"]) for cause in report["causes"]]


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_right_migration_is_equivalent_as_users_launch_it_too(program):
    report, result = verify_against(program, "right")
    assert report["verdict"] == "EQUIVALENT", result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0
    checks = report["checks"]
    assert checks["ending"]["kind"] == "finished"
    assert [launch["ending"]["kind"] for launch in checks["launches"]] == ["finished"] * 2
    assert checks["samples"]["problem"] is None
    assert report["settings"]["against"].endswith(("right.py", "right/train.py"))


WRONG = {
    # program: (the first cause's code, words its message must hold)
    "accuracy": ("output", ["epoch 0: test accuracy …", "original 0.703, migrated 1.406"]),
    "checkpoint": ("file-written-twice", ["checkpoint.pt is written by 2 processes (ranks 0, 1)"]),
    "csv_log": ("file-written-twice", ["training_log.csv is written by 2 processes"]),
    "logging_handlers": ("file-written-twice", ["train.log is written by 2 processes"]),
    "main_only_eval": (
        "hung",
        [
            "timed out",
            "rank 0 waits in all_gather at wrong.py:22 in evaluate",
            "rank 1 did not arrive: it finished the script",
        ],
    ),
    "module_prefix": ("checkpoint", ["net.pt: the saved keys lost their `module.` prefix"]),
    "one_process": (
        "launch-crashed",
        ["python wrong.py, 1 process", "AttributeError", "model.module.state_dict()"],
    ),
    "sharded_twice": ("sharded-twice", ["sharded twice", "1/2 of the original's 256"]),
    "step_schedule": (
        "launch-crashed",
        ["--nproc 2 wrong.py, split_batches=False", "IndexError", "in <lambda>"],
    ),
    "tensorboard": ("file-written-twice", ["events.out.tfevents", "by 2 processes"]),
    "test_loss": ("tracker", ["results.json differs", "test_loss: …"]),
    "unshared_data": ("unsharded", ["not shared", "384, 384 samples"]),
}


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_wrong_migration_diverges_naming_its_defect(program):
    report, result = verify_against(program, "wrong")
    assert report["verdict"] == "DIVERGED", result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 1
    code, words = WRONG[program]
    first_code, first_message = causes(report)[0]
    assert first_code == code, causes(report)
    for word in words:
        assert word in first_message
    assert first_message.split(":")[0] in report["reason"] or code in report["reason"]


def test_verify_against_a_missing_migration_is_a_usage_error(tmp_path):
    original = MIGRATIONS / "accuracy" / "original.py"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "migrator",
            "verify",
            str(original),
            "--against",
            str(tmp_path / "absent.py"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    assert "absent.py: no such file or folder (--against)" in result.stdout
    assert not any(Path(tmp_path).iterdir())
