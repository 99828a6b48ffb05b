"""Helpers shared by the bulk tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent.parent
TRAIN_SCRIPT = (HERE / "data" / "train_mnist_like.py").read_text()


def run_migrate(
    *args: str, cwd: Path | None = None, stdin: bytes | None = None, env: dict | None = None
):
    """`python -m migrator ARGS` in a subprocess; returns CompletedProcess with byte streams.
    `env` adds variables to the environment (None as a value removes one)."""
    merged = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    for name, value in (env or {}).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env=merged,
        timeout=300,
        check=False,
    )
