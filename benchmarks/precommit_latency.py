"""Pre-commit latency: `migrate --check` of one training script, start-up included.

Each command runs as a fresh process on the same file, in a throw-away project (a `.git`
directory, a `.gitignore`, the training script), with bytecode cached (one warm-up run of
each, PYTHONDONTWRITEBYTECODE cleared). Rounds are interleaved (the order rotates), so drift
in machine load hits every command alike; each reports its median wall time.

- `python -c pass`: the interpreter's own start-up, the floor.
- `ruff check`: the linter a pre-commit run sits beside.
- `migrate --check` (edited): the script changed since the last run (a comment line appended
  before every run), so the verdict cache misses and the file is analysed: what a hook sees
  after an edit.
- `migrate --check --force-exclude` (edited): the same through the hook's own entry
  (.pre-commit-hooks.yaml), which also reads the excludes and `.gitignore`.
- `migrate --check` (unchanged): the verdict cache answers.

With `--baseline DIR`, the migrate commands also run on another checkout's migrator in the
same rounds (same-run comparison of a change).

Usage: python benchmarks/precommit_latency.py [--rounds 21] [--script examples/train.py]
       [--baseline DIR]
Prints median (and fastest) wall and median CPU (user + system) times and wall ratios; no
thresholds are asserted here (the goal: edited <= 0.15 s). On a loaded machine the CPU times
are the steadier guide.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GITIGNORE = "__pycache__/\n*.egg-info/\n.venv/\ndata/\ncheckpoints/\n"


def migrate_command() -> list[str]:
    """The console script pre-commit runs, else (not installed, or installed before its entry
    became `migrator.cli:run`: reinstall) the module, which enters the same way."""
    script = Path(sys.executable).parent / "migrate"
    if script.exists() and "from migrator.cli import run" in script.read_text(errors="replace"):
        return [str(script)]
    return [sys.executable, "-m", "migrator"]


def ruff_command() -> list[str] | None:
    found = Path(sys.executable).parent / "ruff"
    if found.exists():
        return [str(found)]
    which = shutil.which("ruff")
    return [which] if which else None


def environment(checkout: Path) -> dict[str, str]:
    """This process's environment, bytecode written, `checkout`'s migrator first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    paths = [str(checkout), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def commands(script: str, baseline: Path | None) -> dict[str, tuple[list[str], bool, dict]]:
    """{label: (argv, edit the script before each run, environment)}."""
    migrate = migrate_command()
    env = environment(REPO)
    table = {"python -c pass": ([sys.executable, "-c", "pass"], False, env)}
    ruff = ruff_command()
    if ruff is not None:
        table["ruff check"] = ([*ruff, "check", "--quiet", script], False, env)
    checkouts = [("", env)] + ([("baseline: ", environment(baseline))] if baseline else [])
    for prefix, checkout_env in checkouts:
        check = [*migrate, "--check", script]
        force = [*migrate, "--check", "--force-exclude", script]
        table[f"{prefix}migrate --check (edited)"] = (check, True, checkout_env)
        table[f"{prefix}migrate --check --force-exclude (edited)"] = (force, True, checkout_env)
        table[f"{prefix}migrate --check (unchanged)"] = (check, False, checkout_env)
    return table


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: lint findings, a script that would be migrated
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr.decode()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--script", default=str(REPO / "examples" / "train.py"))
    parser.add_argument(
        "--baseline", type=Path, help="another checkout (say, `git worktree add`), timed alike"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / ".git").mkdir()
        (project / ".gitignore").write_text(GITIGNORE)
        script = project / "train.py"
        original = Path(args.script).read_bytes()
        script.write_bytes(original)
        table = commands(script.name, args.baseline)
        edits = 0

        def run(label: str) -> tuple[float, float]:
            nonlocal edits
            argv, edit, env = table[label]
            if edit:
                edits += 1
                script.write_bytes(original + f"# edit {edits}\n".encode())
            elif label.endswith("(unchanged)"):
                script.write_bytes(original)
            return timed(argv, project, env)

        for label in table:  # warm-up: bytecode written, the unchanged verdict cached
            run(label)
        for label in table:  # the unchanged file's verdict cached (an edit came after it)
            if label.endswith("(unchanged)"):
                run(label)
        labels = list(table)
        times: dict[str, list[tuple[float, float]]] = {label: [] for label in labels}
        for round_index in range(args.rounds):
            shift = round_index % len(labels)  # rotate who goes first: no position bias
            for label in labels[shift:] + labels[:shift]:
                times[label].append(run(label))
    walls = {label: statistics.median(wall for wall, _ in runs) for label, runs in times.items()}
    fastest = {label: min(wall for wall, _ in runs) for label, runs in times.items()}
    cpus = {label: statistics.median(cpu for _, cpu in runs) for label, runs in times.items()}
    print(f"{Path(args.script).name}, median of {args.rounds} interleaved runs (bytecode cached),")
    print(f"migrate is `{' '.join(Path(part).name for part in migrate_command())}`:")
    print(f"  {'command':<52} {'wall ms':>8} {'(min)':>7} {'CPU ms':>8}   wall / python -c pass")
    for label in labels:
        ratio = walls[label] / walls["python -c pass"]
        print(
            f"  {label:<52} {walls[label] * 1e3:8.1f} {fastest[label] * 1e3:7.1f}"
            f" {cpus[label] * 1e3:8.1f}   x{ratio:.1f}"
        )
    print(f"  (load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
