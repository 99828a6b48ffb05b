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

Usage: python benchmarks/precommit_latency.py [--rounds 21] [--script examples/train.py]
Prints medians and ratios; no thresholds are asserted here (the goal: edited <= 0.15 s).
"""

from __future__ import annotations

import argparse
import os
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
    """The console script pre-commit runs, else the module."""
    script = Path(sys.executable).parent / "migrate"
    return [str(script)] if script.exists() else [sys.executable, "-m", "migrator"]


def ruff_command() -> list[str] | None:
    found = Path(sys.executable).parent / "ruff"
    if found.exists():
        return [str(found)]
    which = shutil.which("ruff")
    return [which] if which else None


def commands(script: str) -> dict[str, tuple[list[str], bool]]:
    """{label: (argv, edit the script before each run)}."""
    migrate = migrate_command()
    table = {"python -c pass": ([sys.executable, "-c", "pass"], False)}
    ruff = ruff_command()
    if ruff is not None:
        table["ruff check"] = ([*ruff, "check", "--quiet", script], False)
    table["migrate --check (edited)"] = ([*migrate, "--check", script], True)
    table["migrate --check --force-exclude (edited)"] = (
        [*migrate, "--check", "--force-exclude", script],
        True,
    )
    table["migrate --check (unchanged)"] = ([*migrate, "--check", script], False)
    return table


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--script", default=str(REPO / "examples" / "train.py"))
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    paths = [str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))  # this checkout's migrator
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / ".git").mkdir()
        (project / ".gitignore").write_text(GITIGNORE)
        script = project / "train.py"
        original = Path(args.script).read_bytes()
        script.write_bytes(original)
        table = commands(script.name)
        edits = 0

        def run(label: str) -> float:
            nonlocal edits
            argv, edit = table[label]
            if edit:
                edits += 1
                script.write_bytes(original + f"# edit {edits}\n".encode())
            elif label.endswith("(unchanged)"):
                script.write_bytes(original)
            return timed(argv, project, env)

        for label in table:  # warm-up: bytecode written, the unchanged verdict cached
            run(label)
        run("migrate --check (unchanged)")
        labels = list(table)
        times: dict[str, list[float]] = {label: [] for label in labels}
        for round_index in range(args.rounds):
            shift = round_index % len(labels)  # rotate who goes first: no position bias
            for label in labels[shift:] + labels[:shift]:
                times[label].append(run(label))
    base = statistics.median(times["python -c pass"])
    print(f"{Path(args.script).name}, median of {args.rounds} interleaved runs (bytecode cached):")
    for label in labels:
        median = statistics.median(times[label])
        print(f"  {label:<42} {median * 1e3:7.1f} ms   x{median / base:5.1f} of python -c pass")


if __name__ == "__main__":
    main()
