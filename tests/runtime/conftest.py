"""Helpers to run the scripts in tests/runtime/scripts the way users launch them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
LAUNCH_TIMEOUT = 180


def _env(extra: dict | None) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # 2 ranks on 2 cores; also silences torchrun's note
    env.pop("WORLD_SIZE", None)
    env.update(extra or {})
    return env


def _run(command: list[str], env: dict | None, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        check=False,
        capture_output=True,
        text=True,
        env=_env(env),
        timeout=timeout,
        cwd=Path(__file__).parents[2],
    )


def run_python(
    script: str, *args: str, env: dict | None = None, timeout: float = LAUNCH_TIMEOUT
) -> subprocess.CompletedProcess:
    """`python script.py args` (no launcher)."""
    return _run([sys.executable, str(SCRIPTS / script), *args], env, timeout)


def run_torchrun(
    script: str,
    *args: str,
    nproc: int = 2,
    env: dict | None = None,
    timeout: float = LAUNCH_TIMEOUT,
) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc-per-node N script.py args` (free port via c10d)."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        str(SCRIPTS / script),
        *args,
    ]
    return _run(command, env, timeout)


def run_migrate_launch(
    script: str,
    *args: str,
    nproc: int = 2,
    env: dict | None = None,
    timeout: float = LAUNCH_TIMEOUT,
) -> subprocess.CompletedProcess:
    """`migrate launch --nproc N script.py args`."""
    command = [
        sys.executable,
        "-m",
        "migrator",
        "launch",
        "--nproc",
        str(nproc),
        str(SCRIPTS / script),
        *args,
    ]
    return _run(command, env, timeout)


def check(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
    return done


def read_json(path: Path):
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runtime")


@pytest.fixture(autouse=True)
def fresh_accelerator_state():
    """Each test is its own program: Accelerator-level state does not leak between tests."""
    yield
    from runtime.state import AcceleratorState

    AcceleratorState._reset_state()
