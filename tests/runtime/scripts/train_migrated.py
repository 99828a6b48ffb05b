"""The same script as train_plain.py after migration to `runtime` (plus checkpoint options)."""

import argparse
import json
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--accum", type=int, default=1)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--samples", type=int, default=64)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--dropout", type=float, default=0.0)
parser.add_argument("--save-at", type=int, default=0, help="save_state after this step, stop")
parser.add_argument("--checkpoint", default=None)
parser.add_argument("--resume", default=None)
args = parser.parse_args()

accelerator = Accelerator(gradient_accumulation_steps=args.accum)
torch.manual_seed(0)
inputs = torch.randn(args.samples, 8)
targets = torch.sin(inputs.sum(dim=1, keepdim=True))
train_loader = DataLoader(TensorDataset(inputs, targets), batch_size=args.batch_size, shuffle=True)
model = torch.nn.Sequential(
    torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Dropout(args.dropout), torch.nn.Linear(16, 1)
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
loss_fn = torch.nn.MSELoss()
model, optimizer, train_loader, scheduler = accelerator.prepare(
    model, optimizer, train_loader, scheduler
)

start_epoch, step, resume_batches = 0, 0, 0
if args.resume:  # the way Accelerate's examples resume inside an epoch
    accelerator.load_state(args.resume)
    with open(os.path.join(args.resume, "progress.json")) as handle:
        start_epoch, step = json.load(handle)
    resume_batches = step - start_epoch * len(train_loader)

losses = []
stopped = False
for epoch in range(start_epoch, args.epochs):
    active_loader = train_loader
    if epoch == start_epoch and resume_batches:
        active_loader = accelerator.skip_first_batches(train_loader, resume_batches)
    for x, y in active_loader:
        with accelerator.accumulate(model):
            loss = loss_fn(model(x), y)
            accelerator.backward(loss)
            losses.append(accelerator.reduce(loss.detach(), "mean").item())
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        step += 1
        if step == args.save_at:
            accelerator.save_state(args.checkpoint)
            if accelerator.is_main_process:
                with open(os.path.join(args.checkpoint, "progress.json"), "w") as handle:
                    json.dump([epoch, step], handle)
            stopped = True
            break
    if stopped:
        break

weights = [p.detach().flatten().tolist() for p in accelerator.unwrap_model(model).parameters()]
if accelerator.is_main_process:
    with open(args.out, "w") as handle:
        json.dump({"losses": losses, "weights": weights, "lr": scheduler.get_last_lr()}, handle)
accelerator.end_training()
