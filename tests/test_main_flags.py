"""A main-process flag kept on an object (`config.master_process = ddp_rank == 0`, then `if
config.master_process:`) is a main-process test like `if rank == 0:` (h12 re-review: an NMT
script's validation under that test got a prepared loader and a reduce that only the main
process reached - a hang). An evaluation there stays plain, with a note."""

from __future__ import annotations

import re

import pytest

from migrator.engine import migrate_text

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class CFG:
    {flag} = True


config = CFG()
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
valid = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)


def validate(model, loader):
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += torch.nn.functional.mse_loss(model(x), y, reduction="sum").item()
    return total / len(loader.dataset)


for epoch in range(2):
    for x, y in train:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if config.{flag}:
        print("valid", validate(model, valid))
"""


@pytest.mark.parametrize("flag", ["master_process", "is_master_proc", "is_chief"])
def test_an_evaluation_under_a_main_flag_of_an_object_stays_plain(flag):
    output, findings = migrate_text(SCRIPT.format(flag=flag))
    assert output is not None, [f.message for f in findings]
    prepared = " ".join(re.findall(r"accelerator\.prepare\(([^)]*)\)", output))
    assert "train" in prepared and "valid" not in prepared
    assert "accelerator.reduce" not in output.split("def validate")[1].split("\n\n\n")[0]
    notes = [f.message for f in findings if "`valid`, which the loop" in f.message]
    assert notes and "runs on one process only" in notes[0]
