"""Code already on Accelerate is left alone; only a half-migrated backward pass is completed
(issue 12, item 1; analysis/on_target.py)."""

from __future__ import annotations

import ast

from migrator.engine import migrate_text

TRAINER = """\
import torch
from accelerate import Accelerator


class Trainer:
    def __init__(self, model, loader):
        self.accelerator = Accelerator()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.model, self.optimizer, self.loader = self.accelerator.prepare(
            model, self.optimizer, loader
        )

    def train(self):
        for x, y in self.loader:
            loss = ((self.model(x) - y) ** 2).mean()
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
"""


def test_half_migrated_trainer_gets_accelerator_backward_through_self():
    output, findings = migrate_text(TRAINER)
    assert output == TRAINER.replace("loss.backward()", "self.accelerator.backward(loss)")
    assert findings == []
    assert output.count("Accelerator()") == 1 and output.count(".prepare(") == 1
    assert migrate_text(output) == (None, [])


PLAIN_LOOP_BESIDE = """\
import torch
from torch.utils.data import DataLoader
from accelerate import Accelerator

accelerator = Accelerator()
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(torch.randn(8, 2), batch_size=2)
probe = DataLoader(torch.randn(8, 2), batch_size=2)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
head = torch.nn.Linear(2, 1)
head_optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
for x in probe:
    head(x).sum().backward()
    head_optimizer.step()
"""


def test_backward_over_an_unprepared_loader_and_optimizer_is_not_ours_to_complete():
    assert migrate_text(PLAIN_LOOP_BESIDE) == (None, [])


RUNTIME_IMPORT_ONLY = """\
import torch
from torch.utils.data import DataLoader
from runtime import Accelerator

model = torch.nn.Linear(2, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
device = torch.device("cuda")
loader = DataLoader(torch.randn(8, 2), batch_size=2)
for x in loader:
    x = x.to(device)
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
"""


def test_a_file_importing_our_accelerator_is_migrated_code():
    """It may be mid-migration by hand; migrate must not add a second Accelerator."""
    assert migrate_text(RUNTIME_IMPORT_ONLY) == (None, [])
    plain = RUNTIME_IMPORT_ONLY.replace("from runtime import Accelerator\n", "")
    output, _ = migrate_text(plain)
    assert output is not None and "Accelerator()" in output  # the same code, not yet on it


HELPER_WITH_ACCELERATOR = """\
def train_epoch(accelerator, model, loader, optimizer):
    for batch in loader:
        loss = model(batch)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_helper_calling_accelerator_backward_is_left_alone():
    assert migrate_text(HELPER_WITH_ACCELERATOR) == (None, [])
    ast.parse(HELPER_WITH_ACCELERATOR)


MODEL_AND_OPTIMIZER_ONLY = """\
import torch
from accelerate import Accelerator


def main(loader):
    accelerator = Accelerator()
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    for x in loader:
        loss = model(x.to(accelerator.device)).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_loop_stepping_a_prepared_optimizer_gets_accelerator_backward():
    output, findings = migrate_text(MODEL_AND_OPTIMIZER_ONLY)
    assert output == MODEL_AND_OPTIMIZER_ONLY.replace(
        "loss.backward()", "accelerator.backward(loss)"
    )
    assert findings == []
