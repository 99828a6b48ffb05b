"""An evaluation loop that hands each batch to a step function of the program, which runs the
model (`self._validation_step(batch)`, `loss, pred = val_step(model, batch)`), evaluates on its
loader as a loop running the model itself does: the loader is prepared, or a note says why it
is not - never silently plain (h12 review: a NER Trainer evaluated its whole validation set
on every process with no finding). A loop that calls a function with loops of its own (a grid
search calling `fit(...)`) is a driver, not an evaluation (grid_search_meeting golden)."""

from __future__ import annotations

import re

import pytest

from migrator.engine import migrate_text

TRAINER = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def {step}

    def fit(self, train_loader, val_loader):
        for x, y in train_loader:
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        total = 0.0
        for {item} in val_loader:
            total += {call}
        return total


train_loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
val_loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
Trainer(torch.nn.Linear(4, 1)).fit(train_loader, val_loader)
"""

STEPS = [
    (
        (
            "_validation_step(self, batch):\n        x, y = batch\n        with torch.no_grad():\n"
            "            return torch.nn.functional.mse_loss(self.model(x), y).item()"
        ),
        "batch",
        "self._validation_step(batch)",
    ),
    (
        "score(self, x, y):\n        return torch.nn.functional.mse_loss(self.model(x), y).item()",
        "x, y",
        "self.score(x, y)",
    ),
    (
        (
            "_forward(self, x):\n        return self.model(x)\n\n"
            "    def check(self, x, y):\n"
            "        return torch.nn.functional.mse_loss(self._forward(x), y).item()"
        ),
        "(x, y)",
        "self.check(x=x, y=y)",
    ),
]


@pytest.mark.parametrize(("step", "item", "call"), STEPS)
def test_a_loop_handing_batches_to_a_step_function_evaluates_on_its_loader(step, item, call):
    output, findings = migrate_text(TRAINER.format(step=step, item=item, call=call))
    assert output is not None, [f.message for f in findings]
    prepared = " ".join(re.findall(r"accelerator\.prepare\(([^)]*)\)", output))
    noted = [f for f in findings if "`val_loader`, which the loop" in f.message]
    assert ("val_loader" in prepared) != bool(noted), (prepared, [f.message for f in noted])
