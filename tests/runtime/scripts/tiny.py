"""The smallest migrated script: one collective, one main-process print, clean exit."""

import sys

import torch

from runtime import Accelerator

accelerator = Accelerator()
total = accelerator.reduce(torch.tensor([accelerator.process_index + 1.0]))
accelerator.print(f"total={total.item():g} processes={accelerator.num_processes}")
if len(sys.argv) > 1:
    accelerator.print("args", sys.argv[1:])
