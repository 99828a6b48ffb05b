"""Schedulers (SPEC §3b.4): a per-step scheduler is prepared only where its steps scale with
the sharded loader. In a loop bounded by a step count, or with a schedule that fails past its
end (a table, a power of `1 - step / total`, a class of the program's own), it stays plain
with a note; a plain `LambdaLR` warm-up that stays valid past its end is prepared."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.fixtures import is_batch_note

HEAD = """\
import itertools

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(40, 4), torch.randn(40, 1)), batch_size=8)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
total_steps = 15  # 3 epochs of 5 batches
"""

EPOCH_LOOP = """\
for epoch in range(3):
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
"""
STEP_LOOP = """\
batches = itertools.cycle(loader)
for step in range(total_steps):
    x, y = next(batches)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    scheduler.step()
"""
WHILE_LOOP = """\
step = 0
while step < total_steps:
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        if step >= total_steps:
            break
"""

TABLE = (
    "lrs = [1 - i / total_steps for i in range(total_steps)]\n"
    "scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lrs[s])\n"
)
POLY = (
    "scheduler = torch.optim.lr_scheduler.LambdaLR(\n"
    "    optimizer, lambda s: (1 - s / total_steps) ** 0.9\n)\n"
)
OWN_CLASS = (
    "class PolyLR(torch.optim.lr_scheduler._LRScheduler):\n"
    "    def get_lr(self):\n"
    "        return [b * (1 - self.last_epoch / 99) ** 0.9 for b in self.base_lrs]\n\n\n"
    "scheduler = PolyLR(optimizer)\n"
)
WARMUP = (
    "scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 5))\n"
)
COSINE = "scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)\n"
NAMED_LAMBDA = (  # a lambda bound to a name first: read as the lambda itself
    "halve = lambda epoch: 0.5\n"
    "scheduler = torch.optim.lr_scheduler.MultiplicativeLR(optimizer, lr_lambda=halve)\n"
)
NAMED_TABLE = (
    "lrs = [1 - i / total_steps for i in range(total_steps)]\n"
    "by_step = lambda s: lrs[s]\n"
    "scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, by_step)\n"
)
UNREADABLE = (
    "import schedules\nscheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedules.warmup)\n"
)


def migrate(scheduler: str, loop: str):
    output, findings = migrate_text(HEAD + scheduler + loop)
    assert output is not None, [f.message for f in findings]
    # the global batch note is test_global_batch.py's (a loop drawing on no loader has none)
    notes = [f.message for f in findings if f.code == "MIG006" and not is_batch_note(f)]
    return output, notes


@pytest.mark.parametrize("loop", [STEP_LOOP, WHILE_LOOP], ids=["next-counted", "while-bounded"])
def test_a_scheduler_in_a_loop_bounded_by_steps_stays_plain(loop):
    output, notes = migrate(COSINE, loop)
    assert "scheduler = accelerator.prepare" not in output
    assert ", scheduler = accelerator.prepare(" not in output
    assert any("bounded by a step count" in note for note in notes)


@pytest.mark.parametrize(
    "schedule", [TABLE, POLY, OWN_CLASS, NAMED_TABLE], ids=["table", "power", "own-class", "named"]
)
def test_a_schedule_that_fails_past_its_end_stays_plain(schedule):
    output, notes = migrate(schedule, EPOCH_LOOP)
    assert "scheduler = accelerator.prepare" not in output
    assert ", scheduler = accelerator.prepare(" not in output
    assert any("past the original's last step" in note for note in notes)
    assert not any("cannot read" in note for note in notes)


def test_a_schedule_it_cannot_read_stays_plain_and_says_so():
    output, notes = migrate(UNREADABLE, EPOCH_LOOP)
    assert ", scheduler = accelerator.prepare(" not in output
    assert any("this tool cannot read, which may fail past" in note for note in notes), notes


@pytest.mark.parametrize(
    "schedule", [WARMUP, COSINE, NAMED_LAMBDA], ids=["bounded-warmup", "cosine", "named-lambda"]
)
def test_a_schedule_valid_past_its_end_in_an_epoch_loop_is_prepared(schedule):
    output, notes = migrate(schedule, EPOCH_LOOP)
    assert "model, optimizer, loader, scheduler = accelerator.prepare(" in output
    assert not notes


def test_prepare_comes_before_the_loader_length_a_later_import_follows():
    """`total_steps = len(loader) * epochs` and then `from torch.optim.lr_scheduler import
    LambdaLR` (h8 ps-slm): prepare goes before the length is read, not after the import past
    it, so the schedule is sized by the prepared loader as its note says."""
    source = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def train(epochs):
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    total_steps = len(loader) * epochs
    warmup_steps = total_steps // 10
    from torch.optim.lr_scheduler import LambdaLR

    def lr_lambda(step):
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    scheduler = LambdaLR(optimizer, lr_lambda)
    for _ in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()


train(2)
"""
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    prepare = output.index("model, optimizer, loader = accelerator.prepare(")
    assert prepare < output.index("total_steps = len(loader) * epochs")
