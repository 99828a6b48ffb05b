"""The smallest migrated script: a DDP step, one collective, one main-process print, clean exit.

The DDP model matters: DDP keeps gloo's worker threads alive past destroy_process_group,
which is what can abort a process at exit.
"""

import sys

import torch

from runtime import Accelerator

accelerator = Accelerator()
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
accelerator.backward(model(torch.ones(2, 4, device=accelerator.device)).sum())
optimizer.step()
total = accelerator.reduce(torch.tensor([accelerator.process_index + 1.0]))
accelerator.print(f"total={total.item():g} processes={accelerator.num_processes}")
if len(sys.argv) > 1:
    accelerator.print("args", sys.argv[1:])
