"""`runtime.launch(fn, args, num_processes=2)`, as a notebook would call it.

Usage: launch_function.py [--fail | --static | --restarts DIR | --sleeper | --one-leaves]
"""

import os
import sys
import time
from pathlib import Path

import torch

from runtime import Accelerator, launch, notebook_launcher


def gather_ranks(scale):
    accelerator = Accelerator()
    if "--fail" in sys.argv and accelerator.process_index == 1:
        print(f"raising at {time.time()}", flush=True)
        raise RuntimeError("function failed on rank 1")
    return accelerator.gather(torch.tensor([accelerator.process_index * scale])).tolist()


def fail_first_attempt(folder):
    """Each process raises in the first round, before it joins the process group (a worker
    the agent stops while the other is still connecting would fail a later round too); after
    the agent restarts them all, they train together and return."""
    restarts = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if restarts == 0:
        (Path(folder) / f"tried{os.environ['RANK']}").write_text("")
        raise RuntimeError("first attempt fails")
    accelerator = Accelerator()
    return [accelerator.process_index, restarts]


def raise_or_sleep():
    if Accelerator().process_index == 0:
        raise RuntimeError("rank 0 does not sleep")
    time.sleep(100)


def only_rank_zero_joins():
    """Rank 1 returns without creating the process group, so rank 0 would wait for it."""
    if os.environ["RANK"] == "1":
        return None
    return Accelerator().process_index


if __name__ == "__main__":
    if "--static" in sys.argv:
        print("result", notebook_launcher(gather_ranks, (10,), 2, rdzv_backend="static"))
    elif "--restarts" in sys.argv:
        folder = sys.argv[sys.argv.index("--restarts") + 1]
        print("result", launch(fail_first_attempt, (folder,), num_processes=2, max_restarts=3))
    elif "--sleeper" in sys.argv:
        started = time.time()
        try:
            launch(raise_or_sleep, num_processes=2, monitor_interval=0.05)
        finally:
            print(f"stopped after {time.time() - started:.1f} s", flush=True)
    elif "--one-leaves" in sys.argv:
        started = time.time()
        try:
            launch(only_rank_zero_joins, num_processes=2)
        finally:
            print(f"stopped after {time.time() - started:.1f} s", flush=True)
    else:
        print("result", launch(gather_ranks, args=(10,), num_processes=2))
