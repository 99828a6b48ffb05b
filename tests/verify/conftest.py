"""Running `migrate verify` the way a user does, on the scripts in fixtures/scripts."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "fixtures" / "scripts"
CLEAN_SCRIPTS = [
    "mlp_regression.py",
    "cnn_classifier.py",
    "embedding_sequence.py",
    "per_step_scheduler.py",
    "train_eval_accuracy.py",
]
RUN_LIMIT_S = 240  # a safety net for the test itself, far above any verify run here


def runtime_available() -> bool:
    try:
        import runtime  # noqa: F401
    except ImportError:
        return False
    return True


needs_runtime = pytest.mark.skipif(not runtime_available(), reason="`import runtime` fails")
needs_accelerate = pytest.mark.skipif(
    importlib.util.find_spec("accelerate") is None, reason="HF Accelerate is not installed"
)


def verify(
    script: str,
    *options: str,
    tmp_dir: Path | None = None,
    script_args: tuple[str, ...] = (),
    cwd: Path = SCRIPTS,
) -> subprocess.CompletedProcess:
    """`migrate verify fixtures/scripts/SCRIPT OPTIONS -- SCRIPT_ARGS`; TMPDIR kept per test.

    Run from the scripts' own folder, as a user runs it beside train.py: every run mirrors
    the current folder (sandbox.py), and the repository's ~1,500 entries mirrored for each
    of a verify's four runs, then removed, cost seconds per test that none of these scripts
    reads (test_robustness keeps one run from the repository root)."""
    env = dict(os.environ)
    env.pop("WORLD_SIZE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if tmp_dir is not None:
        env["TMPDIR"] = str(tmp_dir)
    command = [sys.executable, "-m", "migrator", "verify", str(SCRIPTS / script), *options]
    if script_args:
        command += ["--", *script_args]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=RUN_LIMIT_S
    )


def verify_json(script: str, *options: str, **kwargs) -> tuple[dict, subprocess.CompletedProcess]:
    result = verify(script, "--format", "json", *options, **kwargs)
    return json.loads(result.stdout), result
