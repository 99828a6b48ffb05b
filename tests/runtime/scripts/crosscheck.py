"""One migrated script, run on our runtime or on HF Accelerate (CROSSCHECK_RUNTIME=accelerate).

Seeded, split batches, gradient accumulation, a prepared scheduler and an uneven tail (72
samples, batch 16), so stepping, padding and end-of-loader syncing are all compared.
"""

import json
import os
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

if os.environ.get("CROSSCHECK_RUNTIME") == "accelerate":
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, set_seed

    # HF 1.x ignores Accelerator(split_batches=...) and needs cpu=True for gloo
    accelerator = Accelerator(
        cpu=True,
        gradient_accumulation_steps=2,
        dataloader_config=DataLoaderConfiguration(split_batches=True),
    )
else:
    from runtime import Accelerator, set_seed

    accelerator = Accelerator(gradient_accumulation_steps=2, split_batches=True)

set_seed(42)
inputs = torch.randn(72, 8)
targets = torch.sin(inputs.sum(dim=1, keepdim=True))
loader = DataLoader(
    TensorDataset(inputs, targets),
    batch_size=16,
    shuffle=True,
    generator=torch.Generator().manual_seed(42),
)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

losses, lrs = [], []
for epoch in range(2):
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        losses.append(accelerator.reduce(loss.detach(), "mean").item())
        lrs.append(scheduler.get_last_lr()[0])

weights = [p.detach().flatten().tolist() for p in accelerator.unwrap_model(model).parameters()]
if accelerator.is_main_process:
    with open(sys.argv[1], "w") as handle:
        json.dump({"losses": losses, "lrs": lrs, "weights": weights}, handle)
accelerator.wait_for_everyone()
accelerator.end_training()
