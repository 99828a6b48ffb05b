"""Bulk speed, like for like: `migrate --check --quiet --no-cache` against
`ruff check --select ALL --no-cache --isolated --silent --exit-zero` on the same tree in the same
invocation (the same files, neither printing anything, neither using a cache); the verdict
cache (a run filling an empty cache, then a warm run) against the cold run; and one-file
latency of `migrate --check f.py`, with its import profile (never torch).

Trees: torch's own sources (site-packages) and an ML-shaped tree built offline by
benchmarks/ml_tree.py (torch's sources + 320 training scripts + 100 Accelerate scripts), or
any `--tree`. Runs are interleaved (ruff, cold, fill, warm; again), so machine load hits every
command alike; medians of N, wall and CPU (user + system of the command and all its
processes). Goals are reported, never asserted.

    python benchmarks/bulk.py                        # torch's sources and the ML-shaped tree
    python benchmarks/bulk.py --runs 5 --tree DIR    # other trees (repeat --tree)

Run from the repository's virtual environment (ruff comes with the `test` extra).
"""

from __future__ import annotations

import argparse
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

import ml_tree

HERE = Path(__file__).resolve().parent
TRAIN_SCRIPT = HERE.parent / "tests" / "bulk" / "data" / "train_mnist_like.py"
NOT_TRAINING = "def add(a, b):\n    return a + b\n"
GOALS = {"cold": 1.0, "warm": 0.2, "one file": 0.25}  # x ruff, x cold, seconds


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        sys.exit(f"{name} not found: pip install -e '.[test]'")
    return found


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


def commands(tree: Path, cache: Path, jobs: int | None) -> dict[str, list[str]]:
    migrate = [_tool("migrate"), "--check", "--quiet"] + (["--jobs", str(jobs)] if jobs else [])
    return {
        "ruff": [_tool("ruff"), "check", "--select", "ALL", "--no-cache", "--isolated"]
        + ["--silent", "--exit-zero", str(tree)],
        "cold": [*migrate, "--no-cache", str(tree)],
        "fill": [*migrate, "--cache-dir", str(cache), str(tree)],  # an empty cache, filled
        "warm": [*migrate, "--cache-dir", str(cache), str(tree)],  # the same, now warm
    }


LABELS = {
    "ruff": "ruff check --select ALL --no-cache --silent",
    "cold": "migrate --check --quiet --no-cache",
    "fill": "migrate --check --quiet, empty cache",
    "warm": "migrate --check --quiet, warm cache",
}


def compare(name: str, tree: Path, runs: int, jobs: int | None) -> dict:
    count, size = tree_size(tree)
    print(f"\n== {name}: {tree} ({count} files, {size / 1e6:.1f} MB), {os.cpu_count()} CPUs")
    print(f"   load average at the start: {os.getloadavg()[0]:.1f}")
    samples: dict[str, list[tuple[float, float]]] = {key: [] for key in LABELS}
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(runs):
            cache = Path(scratch) / f"cache{run}"
            for key, command in commands(tree, cache, jobs).items():
                if run == 0:
                    print("   $ " + " ".join(command))
                samples[key].append(measure(command))
            shutil.rmtree(cache, ignore_errors=True)
            line = ", ".join(
                f"{key} {values[-1][0]:.2f} s ({values[-1][1]:.2f} CPU)"
                for key, values in samples.items()
            )
            print(f"   run {run + 1}: {line}")
    medians = {
        key: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for key, values in samples.items()
    }
    table(name, count, size, medians)
    print(f"   load average at the end: {os.getloadavg()[0]:.1f}")
    return medians


def table(name: str, count: int, size: int, medians: dict) -> None:
    ruff_wall, cold_wall = medians["ruff"][0], medians["cold"][0]
    print(f"\n| {name} ({count} files, {size / 1e6:.1f} MB) | wall s | CPU s | vs | wall | CPU |")
    print("|---|---|---|---|---|---|")
    for key, (wall, cpu) in medians.items():
        base = "cold" if key in ("fill", "warm") else "ruff"
        base_wall, base_cpu = medians[base]
        print(
            f"| {LABELS[key]} | {wall:.2f} | {cpu:.2f} | x {base} "
            f"| {wall / base_wall:.2f} | {cpu / base_cpu:.2f} |"
        )
    print(
        f"   goals: cold <= {GOALS['cold']} x ruff (wall {cold_wall / ruff_wall:.2f}); "
        f"warm <= {GOALS['warm']} x cold (wall {medians['warm'][0] / cold_wall:.2f})"
    )


def latency(runs: int) -> None:
    print("\n== one file")
    with tempfile.TemporaryDirectory() as scratch:
        training = Path(scratch) / "train.py"
        training.write_text(TRAIN_SCRIPT.read_text())
        plain = Path(scratch) / "util.py"
        plain.write_text(NOT_TRAINING)
        cache = ["--cache-dir", str(Path(scratch) / "cache")]
        cases = (
            ("training script, cold (analysed)", training, ["--no-cache"]),
            ("training script, warm cache", training, cache),
            ("no training code (prefilter rejects)", plain, ["--no-cache"]),
        )
        warm_up = [_tool("migrate"), "--check", *cache, str(training)]
        subprocess.run(warm_up, capture_output=True, check=False)
        for label, path, flags in cases:
            command = [_tool("migrate"), "--check", *flags, str(path)]
            samples = [measure(command) for _ in range(runs)]
            times = [elapsed for elapsed, _ in samples]
            cpu = statistics.median(c for _, c in samples)
            print(
                f"   {label}: median {statistics.median(times):.3f} s "
                f"(min {min(times):.3f}; {cpu:.3f} s CPU), goal <= {GOALS['one file']}"
            )
            if flags == ["--no-cache"]:
                imports(path, label)


def imports(path: Path, label: str) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "migrator", "--check", "--no-cache", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    names = set()
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if match is None:
            continue
        names.add(match.group(3).split(".")[0])
        if len(match.group(2)) == 1:  # top-level imports only
            rows.append((int(match.group(1)), match.group(3)))
    heavy = ", ".join(f"{name} {us / 1000:.0f} ms" for us, name in sorted(rows, reverse=True)[:5])
    print(
        f"     imports: torch {'IMPORTED' if 'torch' in names else 'not imported'}, "
        f"libcst {'imported' if 'libcst' in names else 'not imported'}; heaviest: {heavy}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path, help="default: the two trees")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="migrate --jobs (default: CPUs)")
    parser.add_argument("--ml-tree", type=Path, help="build (or reuse) the ML-shaped tree here")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=HERE,
        check=False,
    ).stdout.strip()
    print(f"benchmarks/bulk.py at {commit or '?'}, Python {sys.version.split()[0]}")
    if args.tree:
        for tree in args.tree:
            compare(tree.name, tree, args.runs, args.jobs)
    else:
        compare("torch's sources", ml_tree.torch_sources(), args.runs, args.jobs)
        with tempfile.TemporaryDirectory() as scratch:
            root = args.ml_tree or Path(scratch) / "ml-tree"
            if not root.exists():
                counts = ml_tree.build(root)
                built = ", ".join(f"{n} {part}" for part, n in counts.items())
                print(f"\nbuilt the ML-shaped tree: {built}")
            compare("ML-shaped tree", root, args.runs, args.jobs)
    if not args.skip_latency:
        latency(max(args.runs, 5))


if __name__ == "__main__":
    main()
