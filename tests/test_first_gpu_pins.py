"""`torch.cuda.set_device(0)` in a one-device program ("the GPU") goes (h10 review, a
notebook): the Accelerator makes each process's own GPU current, and pinning the first one
put every process's `.cuda()` tensors on GPU 0 beside models on their own GPUs. A guard left
empty goes with it; another index is MIG902's (a pinned GPU, reported)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

PROGRAM = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
@PIN@
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "pin",
    [
        "torch.cuda.set_device(0)",
        "if torch.cuda.is_available():\n    torch.cuda.set_device(0)",
        'if device == "cuda":\n    torch.cuda.set_device("cuda:0")',
    ],
)
def test_pinning_the_first_gpu_goes(pin):
    out, findings = migrate_text(PROGRAM.replace("@PIN@", pin))
    assert out is not None, findings
    assert "set_device" not in out and "\nif " not in out  # an emptied guard goes too
    assert any(f.code == "MIG002" and "set_device(0)" in f.message for f in findings)


def test_what_else_the_guard_does_stays():
    pin = (
        'if device == "cuda":\n    torch.cuda.set_device(0)\n    print(torch.cuda.current_device())'
    )
    out, findings = migrate_text(PROGRAM.replace("@PIN@", pin))
    assert out is not None, findings
    assert "set_device" not in out
    assert "accelerator.print(torch.cuda.current_device())" in out


def test_another_gpu_is_reported_not_removed():
    _out, findings = migrate_text(PROGRAM.replace("@PIN@", "model_gpu = torch.device('cuda', 1)"))
    assert any(f.code == "MIG902" for f in findings), findings
