"""Rank 1 raises while rank 0 waits in a collective: the job must come down, not hang."""

import time

import torch

from runtime import Accelerator

accelerator = Accelerator()
accelerator.wait_for_everyone()
if accelerator.process_index == 1:
    print(f"raising at {time.time()}", flush=True)
    raise ValueError("rank 1 failed on purpose")
accelerator.reduce(torch.ones(1))  # rank 0 blocks here until the agent stops it
accelerator.wait_for_everyone()
