"""The MIG905 note of a loop that draws no batches from a DataLoader says what N processes do
(SPEC §3b.1, §3b.8): the model is prepared, so DDP averages its gradients (the processes keep
one model, not N replicas); the batches are where the script's own `.to(...)` puts them, or,
where it has none, on the CPU while the prepared model is on `accelerator.device` - or, in a
program that computes on the CPU alone and whose tensors cannot be followed, with the model
kept on the CPU too (`cpu=True`, rules/host_inputs.py)."""

from __future__ import annotations

import textwrap

import pytest

from migrator.engine import migrate_text

GET_BATCH = """\
import torch

data = torch.randn(256, 8)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def get_batch(batch_size=16):
    index = torch.randint(0, len(data), (batch_size,))
    x = data[index]
    {place}
    return x, x.sum(dim=1, keepdim=True)


model = torch.nn.Linear(8, 1).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(100):
    x, y = get_batch()
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

REPLAY = """\
import random

import torch


class Agent:
    def __init__(self):
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.net = torch.nn.Linear(4, 2).to(self.device)
        self.optim = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.memory = [(torch.randn(4), random.random()) for _ in range(64)]

    def sample(self):
        batch = random.sample(self.memory, 8)
        states = torch.stack([s for s, _ in batch]){place}
        rewards = torch.tensor([r for _, r in batch]{device})
        return states, rewards

    def learn(self, iterations):
        for _ in range(iterations):
            states, rewards = self.sample()
            loss = (self.net(states).max(1).values - rewards).pow(2).mean()
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()


Agent().learn(10)
"""

INDEXED = """\
import torch


class Pairs:
    def __init__(self):
        self.items = [(torch.randn(3), torch.randn(1)) for _ in range(32)]

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


def train(dataset):
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(1, len(dataset)):
        x, y = dataset[i]
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


train(Pairs())
"""

PLACED = "the batches go where the script's own `.to(...)` puts them"
ON_CPU = "its tensors stay on the CPU, while the prepared model is on `accelerator.device`"
KEPT = "the Accelerator keeps it on the CPU (`cpu=True`, see the MIG004 note)"


def note(source: str):
    output, findings = migrate_text(textwrap.dedent(source))
    assert output is not None, [f.message for f in findings]
    notes = [f for f in findings if f.code == "MIG905"]
    assert len(notes) == 1, [f.message for f in findings]
    return output, notes[0]


@pytest.mark.parametrize(
    "source, placed",
    [
        (GET_BATCH.format(place="x = x.to(device)"), True),
        (GET_BATCH.format(place="x = x.cuda() if torch.cuda.is_available() else x"), True),
        (GET_BATCH.format(place="pass"), False),
        (REPLAY.format(place=".to(self.device)", device=""), True),
        (REPLAY.format(place="", device=", device=self.device"), True),
        (REPLAY.format(place="", device=""), False),
        (INDEXED, None),  # on the CPU alone, items of its own dataset class: kept there
    ],
)
def test_the_note_says_the_prepared_model_averages_and_where_the_batches_are(source, placed):
    output, found = note(source)
    assert "accelerator.prepare(" in output
    assert "DDP averages the prepared model's gradients" in found.message
    assert "N replicas" not in found.message
    assert (PLACED in found.message) is (placed is True)
    assert (ON_CPU in found.message) is (placed is False)
    assert (KEPT in found.message) is (placed is None)
    assert ("cpu=True" in output) is (placed is None)
    assert found.level == "note"


def test_a_model_placed_by_the_script_is_no_batch_placement():
    """`model.to("cpu")` is the model's placement (prepare's now), not the batches': the
    program still computes on the CPU alone, and stays there."""
    source = INDEXED.replace("torch.nn.Linear(3, 1)", "torch.nn.Linear(3, 1).to('cpu')")
    _output, found = note(source)
    assert PLACED not in found.message and KEPT in found.message


FULL_BATCH = """\
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
features, labels = torch.randn(64, 8), torch.randn(64, 1)
{placed}
model = torch.nn.Linear(8, 1).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(20):
    loss = torch.nn.functional.mse_loss(model(features), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_full_batch_placed_once_before_the_loop_is_where_the_script_put_it():
    placed = "features, labels = features.to(device), labels.to(device)"
    _output, found = note(FULL_BATCH.format(placed=placed))
    assert "the batches go where the script's own `.to(...)` puts them" in found.message
    _output, found = note(FULL_BATCH.format(placed=""))  # only the model is placed
    assert ON_CPU in found.message
