"""Running one recorded run as a subprocess: the command, the environment, the time limit.

Every run starts in a new session so that a timeout can kill the whole process group; the
launcher's workers start sessions of their own (torch elastic does that), so each worker
records its pid when it starts and is killed by pid as well. Output goes to files (no pipe
can fill up and block a child); the tails are read back for reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from migrator.verify.records import CONFIG_ENV

BOOTSTRAP = "from migrator.verify.recorder import main\nmain()\n"
TAIL_LINES = 40
KILL_GRACE_S = 3.0


@dataclass
class RunSpec:
    label: str  # "original" | "migrated"
    source_path: Path  # what is executed
    script_path: Path  # the user's file (__file__, argv[0], sys.path[0])
    script_args: list[str]
    nproc: int | None  # None: plain `python`, else the launcher with N processes
    runtime: str  # runtime | accelerate
    device: str
    max_steps: int | None
    no_dropout: bool
    seed_shuffle: bool
    seed: int = 1234
    nudge: bool = False  # the rounding probe: parameters moved by one ulp after every step


@dataclass
class RunResult:
    label: str
    returncode: int | None  # None: killed at the time limit
    seconds: float
    run_dir: Path
    stderr_tail: str  # read before the temporary folder goes

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def read_tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def launcher_command(spec: RunSpec, bootstrap: Path) -> list[str]:
    if spec.nproc is None:
        return [sys.executable, str(bootstrap)]
    if spec.runtime == "runtime":
        return [
            sys.executable,
            "-m",
            "migrator",
            "launch",
            "--nproc",
            str(spec.nproc),
            str(bootstrap),
        ]
    # HF Accelerate's own launcher is torch.distributed.run underneath (accelerate launch)
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={spec.nproc}",
        str(bootstrap),
    ]


def run_environment(spec: RunSpec, config_path: Path, temporary: Path) -> dict[str, str]:
    env = dict(os.environ)
    env[CONFIG_ENV] = str(config_path)
    # torch and torchelastic leave folders in TMPDIR (inductor cache, elastic logs): ours goes
    env["TMPDIR"] = str(temporary)
    env["PYTHONHASHSEED"] = str(spec.seed)
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # deterministic cuBLAS
    env.setdefault("OMP_NUM_THREADS", "1")  # same threads in every process (torchrun's default)
    env["LOGLEVEL"] = env.get("LOGLEVEL", "WARNING")
    if spec.nproc is None or spec.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the original always runs on the CPU
    if spec.nproc is not None:
        if spec.runtime == "runtime":
            env["MIGRATE_SPLIT_BATCHES"] = "1"
        elif spec.device == "cpu":
            env["ACCELERATE_USE_CPU"] = "1"
    return env


@dataclass
class StartedRun:
    spec: RunSpec
    process: subprocess.Popen
    run_dir: Path
    pid_dir: Path
    stderr_path: Path
    started: float


def start(spec: RunSpec, work_dir: Path) -> StartedRun:
    """Starts `spec` under the recorder; `finish` waits for it."""
    run_dir = work_dir / spec.label
    pid_dir = work_dir / f"{spec.label}-pids"
    run_dir.mkdir()
    pid_dir.mkdir()
    bootstrap = work_dir / f"boot_{spec.label}.py"
    bootstrap.write_text(BOOTSTRAP)
    config_path = work_dir / f"{spec.label}.json"
    config_path.write_text(
        json.dumps(
            {
                "out_dir": str(run_dir),
                "pid_dir": str(pid_dir),
                "source_path": str(spec.source_path),
                "script_path": str(spec.script_path),
                "argv": spec.script_args,
                "seed": spec.seed,
                "max_steps": spec.max_steps,
                "no_dropout": spec.no_dropout,
                "seed_shuffle": spec.seed_shuffle,
                "nudge": spec.nudge,
                "runtime": spec.runtime if spec.nproc is not None else None,
                "device": spec.device if spec.nproc is not None else "cpu",
            }
        )
    )
    stderr_path = work_dir / f"{spec.label}.err"
    temporary = work_dir / f"{spec.label}-tmp"
    temporary.mkdir()
    with open(work_dir / f"{spec.label}.out", "wb") as stdout, open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            launcher_command(spec, bootstrap),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=run_environment(spec, config_path, temporary),
            start_new_session=True,
        )
    return StartedRun(spec, process, run_dir, pid_dir, stderr_path, time.monotonic())


def finish(run: StartedRun, deadline: float) -> RunResult:
    """Waits until the run ends or `deadline` (time.monotonic) passes; then nothing is left."""
    try:
        returncode: int | None = run.process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        stop_everything(run.process, run.pid_dir)
    return RunResult(
        run.spec.label,
        returncode,
        time.monotonic() - run.started,
        run.run_dir,
        read_tail(run.stderr_path),
    )


def stop_everything(process: subprocess.Popen, pid_dir: Path) -> None:
    """Kills the launcher's process group and every worker that recorded its pid."""
    groups = [process.pid] + [int(p.name) for p in pid_dir.iterdir() if p.name.isdigit()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = False
        for group in groups:
            try:
                os.killpg(group, sig)
                alive = True
            except (ProcessLookupError, PermissionError):
                pass
        if not alive:
            break
        if sig == signal.SIGTERM:
            try:
                process.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
    try:
        process.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
