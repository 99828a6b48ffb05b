"""One run of an acceptance program: a fresh copy, launched on 1 or 2 processes, under the audit.

`run_program` copies the program's folder, runs its entry there (`python ENTRY ARGS`, or
`python -m migrator launch --nproc 2 ENTRY ARGS`), and reads back what the audit
(`acceptance_audit/sitecustomize.py`) recorded: the main process's stdout, the lines other
processes printed, and which process wrote each file and created each folder inside the copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

AUDIT_DIR = Path(__file__).resolve().parent / "acceptance_audit"
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
LEARNING_RATE = re.compile(r"\blr\b\W{0,3}?([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)")
IGNORED_PARTS = {"__pycache__"}
STDERR_TAIL = 2000


@dataclass
class Launch:
    """How a program is launched: processes and whether batches are split across them."""

    name: str
    nproc: int
    split_batches: bool = False


@dataclass
class RunResult:
    launch: Launch
    returncode: int | None  # None: killed at the timeout
    seconds: float
    main_lines: list[str]
    other_lines: list[tuple[str, str]]  # (rank, line) printed by processes other than the main
    writers: dict[str, set[str]] = field(default_factory=dict)  # file -> ranks that wrote it
    folder_makers: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    model_rows: dict[str, int] = field(default_factory=dict)  # rank -> samples through models
    stderr_tail: str = ""

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def last_error_line(self) -> str:
        lines = [line for line in self.stderr_tail.splitlines() if line.strip()]
        errors = [line for line in lines if re.match(r"^\s*\w+(Error|Exception)\b", line)]
        return (errors or lines or ["(no stderr)"])[-1].strip()


def numbered_lines(lines: list[str]) -> list[list[float]]:
    """The numbers of each line that has any, in order."""
    rows = [[float(n) for n in NUMBER.findall(line)] for line in lines]
    return [row for row in rows if row]


def learning_rates(lines: list[str]) -> list[float]:
    return [float(m) for line in lines for m in LEARNING_RATE.findall(line)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_program(
    program: Path,
    entry: str,
    args: list[str],
    launch: Launch,
    checkout: Path,
    timeout: float,
) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="acceptance-run-") as scratch:
        run_dir = Path(scratch) / "program"
        audit_dir = Path(scratch) / "audit"
        shutil.copytree(program, run_dir, ignore=shutil.ignore_patterns("__pycache__"))
        audit_dir.mkdir()
        env = _environment(checkout, audit_dir, launch)
        if launch.nproc == 1:
            command = [sys.executable, entry, *args]
        else:
            launcher = [sys.executable, "-m", "migrator", "launch", "--nproc", str(launch.nproc)]
            command = [*launcher, entry, *args]
        started = time.perf_counter()
        returncode, stdout, stderr = _run(command, run_dir, env, timeout)
        seconds = time.perf_counter() - started
        return _read_audit(launch, returncode, seconds, stdout, stderr, run_dir, audit_dir)


def _environment(checkout: Path, audit_dir: Path, launch: Launch) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIGRATE_", "ACCELERATE_"))}
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env.update(
        PYTHONPATH=os.pathsep.join([str(AUDIT_DIR), str(checkout)]),
        ACCEPTANCE_AUDIT_DIR=str(audit_dir),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="1",  # one core per process, and the same reductions in every run
        MKL_NUM_THREADS="1",
        MASTER_PORT=str(free_port()),  # for programs that spawn their own process group
        MPLBACKEND="Agg",
        CUDA_VISIBLE_DEVICES="",
    )
    if launch.split_batches:
        env["MIGRATE_SPLIT_BATCHES"] = "1"
    return env


def _run(command, cwd, env, timeout) -> tuple[int | None, str, str]:
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a hang is ended with its whole process group
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        return process.returncode, stdout, stderr
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return None, stdout, stderr


def _read_audit(launch, returncode, seconds, stdout, stderr, run_dir, audit_dir) -> RunResult:
    result = RunResult(launch, returncode, seconds, [], [], stderr_tail=stderr[-STDERR_TAIL:])
    if launch.nproc == 1:
        result.main_lines = stdout.splitlines()
    else:
        for copy in sorted(audit_dir.glob("stdout.*.txt")):
            rank = copy.name.split(".")[2]
            lines = copy.read_text(errors="replace").splitlines()
            if rank == "0":
                result.main_lines.extend(lines)
            elif rank:  # the launcher has no rank and prints torchrun's own messages
                result.other_lines.extend((rank, line) for line in lines if line.strip())
    root = str(run_dir.resolve())
    for log in sorted(audit_dir.glob("audit.*.jsonl")):
        for line in log.read_text(errors="replace").splitlines():
            entry = json.loads(line)
            # a 1-process run has no RANK (it is the main process); a launch's launcher has none
            rank = entry["rank"] or ("0" if launch.nproc == 1 else "launcher")
            if entry["kind"] == "rows":
                result.model_rows[rank] = result.model_rows.get(rank, 0) + entry["rows"]
                continue
            path = os.path.realpath(entry["path"])
            if not path.startswith(root + os.sep):
                continue
            relative = os.path.relpath(path, root)
            if IGNORED_PARTS & set(Path(relative).parts):
                continue
            if entry["kind"] in ("write", "torch.save"):
                result.writers.setdefault(relative, set()).add(rank)
            elif entry["kind"] == "mkdir":
                result.folder_makers.setdefault(relative, []).append((rank, entry["exist_ok"]))
    return result
