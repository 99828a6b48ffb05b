"""`model = train_model(model, optimizer, epochs)`: the call hands the objects to the function
that trains them, and the model it returns is the one it was given. The call is a use, not a
definition: prepare goes before it. Read as a definition, prepare went after training, so
every process trained its own copy on the whole dataset."""

from __future__ import annotations

import re

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

SCRIPT = """\
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
loader = DataLoader(data, batch_size=8)


def train_model(model, optimizer, epochs):
    batches = 0
    for _epoch in range(epochs):
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            batches += 1
    sys.stdout.write(f"batches {batches}\\n")
    return model


model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
model = train_model(model, optimizer, epochs=2)
total = sum(float(p.detach().abs().sum()) for p in model.parameters())
sys.stdout.write(f"weights {total:.6f}\\n")
"""


def test_prepare_goes_before_the_call_that_trains_and_returns_the_model():
    output, findings = migrate_text(SCRIPT)
    assert output is not None, [f.message for f in findings]
    assert (
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.5)\n"
        "\n"
        "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "model = train_model(model, optimizer, epochs=2)\n"
    ) in output
    assert output.count("accelerator.prepare(") == 1


def test_the_returned_model_trained_on_shards_and_agrees_on_two_processes(tmp_path):
    output, _findings = migrate_text(SCRIPT)
    script = tmp_path / "returned.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # 64 samples, batch 8, two processes: 4 batches each per epoch, 2 epochs
    assert re.findall(r"^batches (\d+)$", out, re.MULTILINE) == ["8", "8"], out
    weights = re.findall(r"^weights (\S+)$", out, re.MULTILINE)
    assert len(weights) == 2 and weights[0] == weights[1], out  # gradients were averaged
