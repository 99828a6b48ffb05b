"""A small regression trained with runtime; each process writes OUT_DIR/rank{R}.json.

Usage: two_nodes.py OUT_DIR [--fail-node TAG --fail-step K --how die|raise]
Run on 1 node x 2 processes or 2 nodes x 1 process, it must learn the same thing. With
--fail-node, the process whose launcher was started with NODE_TAG=TAG in its environment
stops at step K: `raise` raises an error, `die` kills its own launcher and itself (its node
dies: no traceback, no goodbye).
"""

import argparse
import json
import os
import signal
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, set_seed

parser = argparse.ArgumentParser()
parser.add_argument("out_dir", type=Path)
parser.add_argument("--fail-node", default=None)
parser.add_argument("--fail-step", type=int, default=-1)
parser.add_argument("--how", choices=["die", "raise"], default="raise")
args = parser.parse_args()
args.out_dir.mkdir(parents=True, exist_ok=True)

accelerator = Accelerator()
rank = accelerator.process_index
set_seed(0)
features = torch.randn(96, 5)
targets = features @ torch.arange(1.0, 6.0).unsqueeze(1) + 0.1 * torch.randn(96, 1)
model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loader = DataLoader(
    TensorDataset(features, targets),
    batch_size=8,
    shuffle=True,
    generator=torch.Generator().manual_seed(1),
)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

losses = []
step = 0
for epoch in range(3):
    for inputs, wanted in loader:
        if args.fail_node == os.environ.get("NODE_TAG") and step == args.fail_step:
            print(f"rank {rank} stops at step {step}", flush=True)
            if args.how == "die":
                os.kill(os.getppid(), signal.SIGKILL)  # the node's launcher
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"rank {rank} gave up at step {step}")
        loss = torch.nn.functional.mse_loss(model(inputs), wanted)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        step += 1

weights = {
    name: value.tolist() for name, value in accelerator.unwrap_model(model).state_dict().items()
}
record = {"rank": rank, "node": os.environ.get("GROUP_RANK"), "losses": losses, "weights": weights}
(args.out_dir / f"rank{rank}.json").write_text(json.dumps(record))
accelerator.end_training()
