"""GPU paths: cuda device per LOCAL_RANK, nccl, fp16 with GradScaler, bf16. Writes rank JSON."""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, set_seed

out_dir = Path(sys.argv[1])
precision = sys.argv[2]
accelerator = Accelerator(mixed_precision=precision)
set_seed(0)
facts = {
    "device": str(accelerator.device),
    "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
    "backend": dist.get_backend() if dist.is_initialized() else None,
    "scaler": accelerator.scaler is not None,
}
inputs = torch.randn(256, 16)
targets = inputs @ torch.randn(16, 1)
loader = DataLoader(TensorDataset(inputs, targets), batch_size=32, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
losses = []
for epoch in range(5):
    for x, y in loader:
        facts["batch_device"] = str(x.device)
        with accelerator.autocast():
            loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(accelerator.reduce(loss.detach().float(), "mean").item())
facts["first_loss"], facts["last_loss"] = losses[0], losses[-1]
facts["output_dtype"] = str(model(x).dtype)
eval_loader = accelerator.prepare(DataLoader(TensorDataset(torch.arange(70)), batch_size=16))
seen = [accelerator.gather_for_metrics(batch) for (batch,) in eval_loader]
facts["gathered"] = sorted(int(i) for i in torch.cat(seen).cpu())
(out_dir / f"rank{accelerator.process_index}.json").write_text(json.dumps(facts))
