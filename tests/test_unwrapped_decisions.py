"""What the plain module inside the wrapper computes (`accelerator.unwrap_model(model)`,
handed to an evaluation helper of another module) may differ per process: BatchNorm's
running statistics are each process's own (the wrapper broadcasts them only at its own
forward). Shown, it gets MIG953's per-process note; deciding an early stop, it could leave
one process training while the others wait (h9 review, a UNet), so the migration is refused
there. An evaluation of this file's own, over a prepared loader, is gathered as before."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

TRAINING = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from helpers import evaluate_model

model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
val = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
best = float("inf")
for epoch in range(20):
    model.train()
    for x, y in train:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    @EVALUATE@
    print(f"epoch {epoch} val {val_loss:.4f}")
@AFTER@
"""


@pytest.mark.parametrize(
    "evaluate",
    ["val_loss = evaluate_model(model, val)", "val_loss, accuracy = evaluate_model(model, val)"],
)
@pytest.mark.parametrize(
    "after",
    [
        "    if val_loss < 0.5:\n        break",
        "    if val_loss < best:\n        best = val_loss\n    elif epoch > 5:\n        break",
    ],
)
def test_an_early_stop_on_the_plain_modules_value_is_refused(evaluate, after):
    out, findings = migrate_text(TRAINING.replace("@EVALUATE@", evaluate).replace("@AFTER@", after))
    assert out is None
    decided = [f for f in findings if f.code == "MIG953" and "decides on this process" in f.message]
    assert decided, findings


def test_the_plain_modules_value_shown_is_said_to_be_per_process():
    source = TRAINING.replace("@EVALUATE@", "val_loss = evaluate_model(model, val)")
    out, findings = migrate_text(source.replace("@AFTER@", ""))
    assert out is not None, findings
    assert "evaluate_model(accelerator.unwrap_model(model), val)" in out
    assert any(f.code == "MIG953" and "`val_loss`" in f.message for f in findings), findings


def test_saving_the_plain_module_is_no_per_process_value():
    """`unwrap_model(model).state_dict()` runs no forward: a checkpoint is not flagged."""
    source = TRAINING.replace("@EVALUATE@", "val_loss = 0.0").replace(
        "@AFTER@", "torch.save(model.state_dict(), 'model.pt')"
    )
    out, findings = migrate_text(source)
    assert out is not None, findings
    assert "accelerator.save(accelerator.unwrap_model(model).state_dict(), 'model.pt')" in out
    assert not [f for f in findings if f.code == "MIG953"], findings
