"""Runtime overhead, measured against references in the same invocation.

1. Step time of one small training loop (MLP, DataLoader, SGD, StepLR; 1 process, 1 thread)
   written three ways: plain PyTorch, on `runtime`, on HF Accelerate (when installed). All
   variants live in one fresh interpreter and their epochs are interleaved, so drift in
   machine speed hits them alike; each reports the median per-step time over its epochs.
2. Import cost beyond `import torch` of `import runtime` / `from runtime import Accelerator`
   (and the same for `accelerate`): median of fresh interpreters.

Usage: python benchmarks/runtime_overhead.py [--steps 400] [--rounds 7] [--imports 10]
Prints ratios to the plain loop; no thresholds are asserted here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys

LOOP = r"""
import json, statistics, sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
variants, steps, rounds = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)

def build():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(steps * 32, 32), torch.randn(steps * 32, 1))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100)
    return model, optimizer, loader, scheduler

loops = {}
for variant in variants:
    if variant == "plain":
        loops[variant] = (build(), lambda loss: loss.backward())
        continue
    if variant == "runtime":
        from runtime import Accelerator
        accelerator = Accelerator()
    else:
        from accelerate import Accelerator
        accelerator = Accelerator(cpu=True)
    loops[variant] = (accelerator.prepare(*build()), accelerator.backward)

def epoch(objects, backward):
    model, optimizer, loader, scheduler = objects
    loss_fn = torch.nn.functional.mse_loss
    start = time.perf_counter()
    for x, y in loader:
        loss = loss_fn(model(x), y)
        backward(loss)
        optimizer.step(); scheduler.step(); optimizer.zero_grad()
    return (time.perf_counter() - start) / len(loader)

for variant in variants:  # warm-up
    epoch(*loops[variant])
times = {variant: [] for variant in variants}
for round_index in range(rounds):
    shift = round_index % len(variants)  # rotate who goes first: no position bias
    for variant in variants[shift:] + variants[:shift]:
        times[variant].append(epoch(*loops[variant]))
print(json.dumps({variant: statistics.median(t) for variant, t in times.items()}))
"""

IMPORT = r"""
import sys, time
import torch
start = time.perf_counter()
exec(sys.argv[1])
print(time.perf_counter() - start)
"""


def run(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--imports", type=int, default=10)
    args = parser.parse_args()
    have_accelerate = importlib.util.find_spec("accelerate") is not None

    variants = ["plain", "runtime"] + (["accelerate"] if have_accelerate else [])
    step = json.loads(run(LOOP, ",".join(variants), str(args.steps), str(args.rounds)))
    print(f"step time, {args.steps} steps/epoch, median of {args.rounds} interleaved epochs:")
    for variant in variants:
        ratio = step[variant] / step["plain"]
        print(f"  {variant:<11} {step[variant] * 1e6:8.1f} us/step   x{ratio:.3f} of plain")
    if have_accelerate:
        print(f"  runtime / accelerate: x{step['runtime'] / step['accelerate']:.3f}")

    statements = ["import runtime", "from runtime import Accelerator"]
    if have_accelerate:
        statements += ["import accelerate", "from accelerate import Accelerator"]
    print(f"import cost beyond `import torch`, median of {args.imports} fresh interpreters:")
    cost = {
        statement: statistics.median(float(run(IMPORT, statement)) for _ in range(args.imports))
        for statement in statements
    }
    for statement in statements:
        print(f"  {statement:<34} {cost[statement] * 1e3:6.1f} ms")
    if have_accelerate:
        ratio = cost["from runtime import Accelerator"] / cost["from accelerate import Accelerator"]
        print(f"  Accelerator, runtime / accelerate: x{ratio:.3f}")
    if sys.flags.dont_write_bytecode:
        print("  (PYTHONDONTWRITEBYTECODE is set: every import above compiles from source)")


if __name__ == "__main__":
    main()
