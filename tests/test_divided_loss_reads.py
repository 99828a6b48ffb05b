"""MIG022 removes the division of the loss by the accumulation steps (accelerator.backward
divides), but what else the original read of the divided loss - a running sum for the log, a
print - still reads `loss / k`, as the original did (rules/divided_losses.py)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

TEMPLATE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

accum = 4
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
logged = []
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.mse_loss(model(x), y)
    {divide}
    loss.backward()
    {read}
    if (step + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
print(len(logged))
"""

DIVISIONS = ["loss = loss / accum", "loss /= accum"]
READS = {
    "appended number": ("logged.append(loss.item())", "logged.append((loss / accum).item())"),
    "detached tensor": ("logged.append(loss.detach())", "logged.append((loss / accum).detach())"),
}


@pytest.mark.parametrize("divide", DIVISIONS)
@pytest.mark.parametrize("case", READS)
def test_reads_of_the_divided_loss_keep_the_division(divide, case):
    read, kept = READS[case]
    output, findings = migrate_text(TEMPLATE.format(divide=divide, read=read))
    assert output is not None, [f.message for f in findings]
    assert divide not in output
    assert "accelerator.backward(loss)" in output  # the backward's loss: undivided, it divides
    assert kept in output, output


def test_a_read_after_the_loss_is_bound_again_is_left():
    read = "loss = loss.detach()\n    logged.append(loss.item())"
    output, findings = migrate_text(TEMPLATE.format(divide="loss = loss / accum", read=read))
    assert output is not None, [f.message for f in findings]
    assert "loss = (loss / accum).detach()" in output
    appended = next(line for line in output.splitlines() if "logged.append(" in line)
    assert "/ accum" not in appended  # the name holds the divided loss already
