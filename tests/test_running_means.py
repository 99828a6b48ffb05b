"""A running mean (`m += (x - m) / (i + 1)`) is no sum: MIG032 does not sum it over the
processes (h10 review: a GNN's printed and logged MSE came out N times too large); it stays
this process's own mean, said where it is shown. The sums beside it are reduced."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

LOOP = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)

for epoch in range(2):
    mean = 0.0
    total = 0.0
    for i, (x, y) in enumerate(train):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        @MEAN@
        total += loss.item()
    print(f"epoch {epoch} mean {mean:.4f} total {total:.4f}")
"""


@pytest.mark.parametrize(
    "update",
    [
        "mean += (loss.item() - mean) / (i + 1)",
        "mean += (1 / (i + 1)) * (loss.item() - mean)",
        "mean += 0.1 * (loss.item() - mean)",  # a decayed average
    ],
)
def test_a_running_mean_is_not_summed_over_the_processes(update):
    out, findings = migrate_text(LOOP.replace("@MEAN@", update))
    assert out is not None, findings
    assert "mean = accelerator.reduce(" not in out
    assert (
        'total = accelerator.reduce(torch.tensor(total, device=accelerator.device), "sum")' in out
    )
    shown = [f for f in findings if f.code == "MIG953" and "`mean`" in f.message]
    assert shown, findings  # said to be this process's own
