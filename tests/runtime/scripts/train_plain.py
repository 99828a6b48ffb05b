"""An un-migrated training script: one process, manual `loss / k` accumulation."""

import argparse
import json

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--accum", type=int, default=1)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--samples", type=int, default=64)
parser.add_argument("--batch-size", type=int, default=16)
args = parser.parse_args()

torch.manual_seed(0)
inputs = torch.randn(args.samples, 8)
targets = torch.sin(inputs.sum(dim=1, keepdim=True))
train_loader = DataLoader(TensorDataset(inputs, targets), batch_size=args.batch_size, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
loss_fn = torch.nn.MSELoss()

losses = []
for epoch in range(args.epochs):
    for step, (x, y) in enumerate(train_loader):
        loss = loss_fn(model(x), y)
        (loss / args.accum).backward()
        losses.append(loss.item())
        if (step + 1) % args.accum == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()

weights = [p.detach().flatten().tolist() for p in model.parameters()]
with open(args.out, "w") as handle:
    json.dump({"losses": losses, "weights": weights, "lr": scheduler.get_last_lr()}, handle)
