"""A loop that gathers its batches draws them from prepared loaders only (h10 review, a
notebook): an evaluation helper the migration gathers in, called again with a loader it did
not prepare (the name rebound to a new test loader), returned the whole set N times. The
check of the migrated text refuses that version; the evaluation is then left plain (every
process evaluates the whole set, said in a MIG006 note), which is sound."""

from __future__ import annotations

import ast

import pytest

from migrator.engine import migrate_text
from migrator.soundness.model import OutputModel
from migrator.soundness.plain_gathers import plain_gathers

PROGRAM = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = torch.nn.CrossEntropyLoss()
train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64,))), batch_size=8)
val = DataLoader(TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40,))), batch_size=8)


def test(loader):
    correct = total = 0
    with torch.no_grad():
        for x, y in @ITERATE@:
            predicted = model(x).argmax(1)
            correct += (predicted == y).sum().item()
            total += y.size(0)
    return correct / total


for epoch in range(2):
    for x, y in train:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(epoch, test(val))

val = DataLoader(TensorDataset(torch.randn(20, 4), torch.randint(0, 3, (20,))), batch_size=8)
print("again", test(val))
"""


@pytest.mark.parametrize("iterate", ["loader", "enumerate(loader)"])
def test_a_helper_gathering_a_loader_left_plain_is_not_migrated_so(iterate):
    source = PROGRAM.replace("@ITERATE@", iterate)
    if iterate.startswith("enumerate"):
        source = source.replace("for x, y in", "for _, (x, y) in")
    out, findings = migrate_text(source)
    assert out is not None, findings
    assert "gather_for_metrics" not in out  # the evaluation left plain: sound
    assert any(f.code == "MIG006" and "`val`" in f.message and "not prepared" in f.message
               for f in findings), findings  # fmt: skip


GATHERED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from runtime import Accelerator

accelerator = Accelerator()
model = torch.nn.Linear(4, 3)
val = DataLoader(TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40,))), batch_size=8)
other = DataLoader(TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40,))), batch_size=8)
model, val = accelerator.prepare(model, val)


def test(loader):
    for x, y in loader:
        predicted = model(x).argmax(1)
        predicted, y = accelerator.gather_for_metrics((predicted, y))


test(val)
@SECOND@
"""


@pytest.mark.parametrize(("second", "refused"), [("test(other)", True), ("test(val)", False)])
def test_the_obligation_names_the_loader_left_plain(second, refused):
    text = GATHERED.replace("@SECOND@", second)
    found = plain_gathers(OutputModel.read(text))
    assert bool(found) is refused
    if refused:
        assert "`loader`" in found[0].message and "left plain" in found[0].message
        assert isinstance(found[0].node, ast.Call)
