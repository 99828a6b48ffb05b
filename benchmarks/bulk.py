"""Bulk speed: `migrate --check` against `ruff check --select ALL --no-cache` on the same tree,
in the same invocation (runs interleaved, so both see the same machine load), medians of N;
and one-file latency of `migrate --check f.py`, with the import profile (never torch).

    python benchmarks/bulk.py                      # torch's own sources in site-packages
    python benchmarks/bulk.py --tree DIR --runs 5  # any other tree too (repeat --tree)

Run from the repository's virtual environment (ruff comes with the `test` extra).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN_SCRIPT = HERE.parent / "tests" / "bulk" / "data" / "train_mnist_like.py"
NOT_TRAINING = "def add(a, b):\n    return a + b\n"


def torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed: pass --tree")
    return Path(spec.origin).parent


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        sys.exit(f"{name} not found: pip install -e '.[test]'")
    return found


def wall(command: list[str]) -> float:
    return measure(command)[0]


def measure(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and all its processes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def tree_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*.py") if p.is_file() and not p.is_symlink()]
    return len(files), sum(p.stat().st_size for p in files)


def compare(tree: Path, runs: int, jobs: int | None) -> float:
    migrate = [_tool("migrate"), "--check", "--quiet", str(tree)]
    if jobs:
        migrate[2:2] = ["--jobs", str(jobs)]
    ruff = [_tool("ruff"), "check", "--select", "ALL", "--no-cache", "--isolated", str(tree)]
    count, size = tree_size(tree)
    print(f"tree {tree}: {count} files, {size / 1e6:.1f} MB, {os.cpu_count()} CPUs")
    print("  $ " + " ".join(migrate))
    print("  $ " + " ".join(ruff))
    ours, theirs, our_cpu, their_cpu = [], [], [], []
    for run in range(runs):
        elapsed, cpu = measure(ruff)
        theirs.append(elapsed)
        their_cpu.append(cpu)
        elapsed, cpu = measure(migrate)
        ours.append(elapsed)
        our_cpu.append(cpu)
        print(
            f"  run {run + 1}: migrate {ours[-1]:.2f} s ({our_cpu[-1]:.2f} s CPU), "
            f"ruff {theirs[-1]:.2f} s ({their_cpu[-1]:.2f} s CPU)"
        )
    median = statistics.median
    ratio = median(ours) / median(theirs)
    print(
        f"  median wall: migrate {median(ours):.2f} s, ruff {median(theirs):.2f} s, "
        f"ratio {ratio:.2f} (goal <= 1.0)"
    )
    print(
        f"  median CPU:  migrate {median(our_cpu):.2f} s, ruff {median(their_cpu):.2f} s, "
        f"ratio {median(our_cpu) / median(their_cpu):.2f}"
    )
    print(f"  machine load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return ratio


def latency(runs: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        training = Path(scratch) / "train.py"
        training.write_text(TRAIN_SCRIPT.read_text())
        plain = Path(scratch) / "util.py"
        plain.write_text(NOT_TRAINING)
        for label, path in (
            ("training script (LibCST runs)", training),
            ("no training code (prefilter rejects)", plain),
        ):
            command = [_tool("migrate"), "--check", str(path)]
            samples = [measure(command) for _ in range(runs)]
            times = [elapsed for elapsed, _ in samples]
            cpu = statistics.median(c for _, c in samples)
            print(
                f"one file, {label}: median {statistics.median(times):.3f} s "
                f"(min {min(times):.3f}; {cpu:.3f} s CPU), goal <= 0.25"
            )
            imports(path, label)


def imports(path: Path, label: str) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "migrator", "--check", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if match and len(match.group(3)) == 1:  # top-level imports only
            rows.append((int(match.group(2)), match.group(4)))
    names = set()
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+\d+ \| *(\S+)", line)
        if match:
            names.add(match.group(1).split(".")[0])
    heavy = ", ".join(f"{name} {us / 1000:.0f} ms" for us, name in sorted(rows, reverse=True)[:5])
    print(
        f"  imports ({label}): torch {'IMPORTED' if 'torch' in names else 'not imported'}, "
        f"libcst {'imported' if any(n.startswith('libcst') for n in names) else 'not imported'};"
        f" heaviest top-level: {heavy}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path, help="default: torch's sources")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="migrate --jobs (default: CPUs)")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    for tree in args.tree or [torch_sources()]:
        compare(tree, args.runs, args.jobs)
    if not args.skip_latency:
        latency(max(args.runs, 5))


if __name__ == "__main__":
    main()
