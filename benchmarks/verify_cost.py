"""What `migrate verify` costs: its wall time against one plain run of the original script.

    python benchmarks/verify_cost.py [--nproc 2] [--repeats 3] [SCRIPT ...]

Both are measured in this invocation, alternating, on the same machine; the ratio of medians
is printed per script (target: at most 2.5x). Default scripts: fixtures/scripts clean ones.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SCRIPTS = ["mlp_regression.py", "per_step_scheduler.py", "cnn_classifier.py"]
TARGET_RATIO = 2.5


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", default=DEFAULT_SCRIPTS)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'script':28} {'plain s':>8} {'verify s':>9} {'ratio':>6}  (nproc {args.nproc}, "
        f"median of {args.repeats})"
    )
    ratios = []
    for name in args.scripts:
        script = Path(name) if Path(name).exists() else ROOT / "fixtures" / "scripts" / name
        plain, verify = [], []
        for _ in range(args.repeats):
            plain.append(timed([sys.executable, str(script)]))
            verify.append(
                timed(
                    [
                        sys.executable,
                        "-m",
                        "migrator",
                        "verify",
                        str(script),
                        "--nproc",
                        str(args.nproc),
                    ]
                )
            )
        ratio = statistics.median(verify) / statistics.median(plain)
        ratios.append(ratio)
        print(
            f"{script.name:28} {statistics.median(plain):8.2f} {statistics.median(verify):9.2f} "
            f"{ratio:6.2f}"
        )
    overall = statistics.median(ratios)
    verdict = "within" if overall <= TARGET_RATIO else "ABOVE"
    print(f"median ratio {overall:.2f} ({verdict} the {TARGET_RATIO}x target)")


if __name__ == "__main__":
    main()
