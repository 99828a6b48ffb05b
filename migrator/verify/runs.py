"""Running one recorded run as a subprocess: the command, the environment, the time limit.

Every run starts in a new session so that a timeout can kill the whole process group; the
launcher's workers start sessions of their own (torch elastic does that), so each worker
records its pid when it starts and is killed by pid as well. Output goes to files (no pipe
can fill up and block a child); the tails are read back for reports. Each run works in its
own mirror of the current folder (`sandbox.py`).

A run whose processes stop beating (`liveness.py`) for `stall_s` seconds has hung: before it
is stopped, every worker is asked for its stack (SIGUSR2), so that the report can say where
each rank waits and which did not arrive.
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

from migrator.verify import sandbox
from migrator.verify.records import CONFIG_ENV, beat_file, stack_file

BOOTSTRAP = "from migrator.verify.recorder import main\nmain()\n"
TAIL_LINES = 40
KILL_GRACE_S = 3.0
POLL_S = 0.2
DUMP_WAIT_S = 2.0  # for every rank of a hung run to write its stack


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
    split_batches: bool = True  # N processes: each takes a slice of every original batch

    @property
    def processes(self) -> int:
        return self.nproc or 1


@dataclass
class RunResult:
    label: str
    returncode: int | None  # None: killed at the time limit
    seconds: float
    run_dir: Path
    stderr_tail: str  # read before the temporary folder goes
    hung: bool = False  # stopped after stall_s seconds without a heartbeat
    stall_s: float | None = None
    sandbox: Path | None = None  # the run's working folder (what it wrote, by relative path)

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
    if spec.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the original (and every --device cpu run) sees no GPU
    if spec.nproc is not None:
        if spec.runtime == "runtime" and spec.split_batches:
            env["MIGRATE_SPLIT_BATCHES"] = "1"
        elif spec.runtime == "accelerate" and spec.device == "cpu":
            env["ACCELERATE_USE_CPU"] = "1"
    # the runs start in a mirror of the current folder: verify's own package stays importable
    package_root = str(Path(__file__).resolve().parents[2])
    if "site-packages" not in package_root:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


@dataclass
class StartedRun:
    spec: RunSpec
    process: subprocess.Popen
    run_dir: Path
    pid_dir: Path
    stderr_path: Path
    started: float
    sandbox: Path
    beats: int = 0
    quiet_since: float = 0.0

    def check(self, now: float) -> float:
        """Reads the heartbeats; returns how long the run has been quiet."""
        total = 0
        for rank in range(self.spec.processes):
            try:
                total += int.from_bytes(beat_file(self.run_dir, rank).read_bytes()[:8], "little")
            except OSError:
                pass
        if total != self.beats or not self.quiet_since:
            self.beats, self.quiet_since = total, now
        return now - self.quiet_since


def start(spec: RunSpec, work_dir: Path) -> StartedRun:
    """Starts `spec` under the recorder; `finish` waits for it."""
    run_dir = work_dir / spec.label
    pid_dir = work_dir / f"{spec.label}-pids"
    run_dir.mkdir()
    pid_dir.mkdir()
    working_folder = work_dir / f"{spec.label}-cwd"
    sandbox.mirror(Path.cwd(), working_folder)
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
                "device": spec.device,
                "split_batches": spec.split_batches,
                "work_dir": str(work_dir),
                "sandbox": str(working_folder),
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
            cwd=working_folder,
            start_new_session=True,
        )
    return StartedRun(
        spec, process, run_dir, pid_dir, stderr_path, time.monotonic(), working_folder
    )


def finish(
    run: StartedRun,
    deadline: float,
    stall_s: float | None = None,
    watching: tuple[StartedRun, ...] = (),
) -> RunResult:
    """Waits until the run ends, `deadline` (time.monotonic) passes, or (with `stall_s`) its
    processes have been quiet that long; then nothing of it is left. `watching`: other runs
    whose heartbeats are read meanwhile (their quiet time counts from now on)."""
    returncode, hung = None, False
    while True:
        now = time.monotonic()
        for other in watching:
            other.check(now)
        quiet = run.check(now)
        returncode = run.process.poll()
        if returncode is not None or now >= deadline:
            break
        # before the first beat (starting Python, torch, the process group) wait twice as long
        if stall_s is not None and quiet >= (stall_s if run.beats else 2 * stall_s):
            hung = True
            break
        try:  # returns as soon as the run ends, not at the next poll
            run.process.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
    if returncode is None:
        ask_for_stacks(run)
    stop_everything(run.process, run.pid_dir)
    return RunResult(
        run.spec.label,
        returncode,
        time.monotonic() - run.started,
        run.run_dir,
        read_tail(run.stderr_path),
        hung=hung,
        stall_s=stall_s,
        sandbox=run.sandbox,
    )


def ask_for_stacks(run: StartedRun) -> None:
    """SIGUSR2 to every worker (liveness.dump_stack_on_request); waits for their dumps."""
    workers = {}
    for entry in run.pid_dir.iterdir():
        if entry.name.isdigit():
            try:
                workers[int(entry.name)] = int(entry.read_text() or 0)
            except (OSError, ValueError):
                continue
    for pid in workers:
        try:
            os.kill(pid, signal.SIGUSR2)
        except (ProcessLookupError, PermissionError):
            pass
    limit = time.monotonic() + DUMP_WAIT_S
    while time.monotonic() < limit:
        if all(_has_dump(run.run_dir, rank) for rank in workers.values()):
            time.sleep(0.1)  # the dump of the last thread
            return
        time.sleep(0.05)


def _has_dump(run_dir: Path, rank: int) -> bool:
    try:
        return stack_file(run_dir, rank).stat().st_size > 0
    except OSError:
        return False


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
