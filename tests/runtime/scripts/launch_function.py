"""`runtime.launch(fn, args, num_processes=2)`, as a notebook would call it."""

import sys
import time

import torch

from runtime import Accelerator, launch


def gather_ranks(scale):
    accelerator = Accelerator()
    if "--fail" in sys.argv and accelerator.process_index == 1:
        print(f"raising at {time.time()}", flush=True)
        raise RuntimeError("function failed on rank 1")
    return accelerator.gather(torch.tensor([accelerator.process_index * scale])).tolist()


if __name__ == "__main__":
    print("result", launch(gather_ranks, args=(10,), num_processes=2))
