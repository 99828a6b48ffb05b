"""What a gather may hold (h11 review): a tuple that mixes tensors with a dict batch's text
field is gathered as one object per process, and unpacking HF's flattened result fails, so
such a field is gathered on its own (MIG031); a loop's whole batch that the loop reads as an
object of attributes (a graph batch's `data.y`) is no tree of tensors and is not cut at the
padding, so the soundness check refuses the gather and the evaluation stays on the whole set
(the engine's plain version)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

DICT_BATCHES = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Reviews(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return {"text": f"review {i}", "ids": torch.randn(4), "label": torch.tensor(i % 2)}


model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_loader = DataLoader(Reviews(), batch_size=8, shuffle=True)
test_loader = DataLoader(Reviews(), batch_size=8)
for batch in train_loader:
    loss = torch.nn.functional.cross_entropy(model(batch["ids"]), batch["label"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
texts, predictions, labels = [], [], []
with torch.no_grad():
    for d in test_loader:
        @FIELDS@
        preds = model(d["ids"]).argmax(1)
        texts.extend(words)
        predictions.extend(preds)
        labels.extend(targets)
print(len(texts), torch.stack(predictions).eq(torch.stack(labels)).float().mean().item())
"""


@pytest.mark.parametrize(
    ("fields", "together", "alone"),
    [
        ('words = d["text"]\n        targets = d["label"]', "preds", ["targets", "words"]),
        ('words = d["text"]\n        targets = d["label"].long()', "preds, targets", ["words"]),
        ('words, targets = d["text"], d["label"].long()', "preds, targets", ["words"]),
    ],
)
def test_a_dict_batch_field_is_gathered_on_its_own(fields, together, alone):
    out, findings = migrate_text(DICT_BATCHES.replace("@FIELDS@", fields))
    assert out is not None, findings
    gathers = [line.strip() for line in out.splitlines() if "gather_for_metrics(" in line]
    argument = f"({together})" if ", " in together else together
    expected = [f"{together} = accelerator.gather_for_metrics({argument})"]
    expected += [f"{name} = accelerator.gather_for_metrics({name})" for name in alone]
    assert sorted(gathers) == sorted(expected), gathers


GRAPH_BATCHES = """\
import torch
from torch.utils.data import DataLoader


class Graphs:
    def __init__(self, n):
        self.x = torch.randn(n, 4)
        self.y = torch.randint(0, 2, (n,))


model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_loader = DataLoader(list(range(40)), batch_size=8, shuffle=True, collate_fn=Graphs)
test_loader = DataLoader(list(range(40)), batch_size=8, collate_fn=Graphs)
for data in train_loader:
    loss = torch.nn.functional.cross_entropy(model(data.x), data.y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
correct = total = 0
with torch.no_grad():
    for data in test_loader:
        outputs = model(data.x)
        correct += (outputs.argmax(1) == data.y).sum().item()
        total += data.y.numel()
print(correct / total)
"""


def test_a_batch_read_as_an_object_is_not_gathered_and_its_loader_stays_plain():
    out, findings = migrate_text(GRAPH_BATCHES)
    assert out is not None, findings
    assert "gather" not in out, out
    assert "train_loader = accelerator.prepare(" in out or ", train_loader = accel" in out
    assert "test_loader = DataLoader(" in out and "test_loader)" not in out.split("print")[0]
    noted = [f for f in findings if f.code == "MIG006" and "`test_loader`" in f.message]
    assert noted and "soundness check refused" in noted[0].message, findings


MIXED_EVAL = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(50, 4), torch.randint(0, 2, (50,)))
train_loader = DataLoader(data, batch_size=8, shuffle=True)
test_loader = DataLoader(data, batch_size=8)
for x, y in train_loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
losses, correct = [], 0
with torch.no_grad():
    for x, y in test_loader:
        outputs = model(x)
        preds = outputs.argmax(1)
        loss = torch.nn.functional.cross_entropy(outputs, y)
        correct += (preds == y).sum().item()
        losses.append(loss.item())
print(correct / 50, sum(losses) / len(losses))
"""


def test_a_loss_reduced_per_batch_after_a_gather_in_the_loop_is_noted():
    """The gather drops the padding of the last batches, the per-batch reduction of the loss
    beside it does not: the note on what the reduction counts is said all the same (h11
    re-review: the gather said nothing and silenced the note)."""
    out, findings = migrate_text(MIXED_EVAL)
    assert out is not None, findings
    assert "accelerator.gather_for_metrics(" in out and "accelerator.reduce(" in out, out
    noted = [f for f in findings if f.code == "MIG031" and "reduced batch by batch" in f.message]
    assert noted and "`loss`" in noted[0].message, [f.message for f in findings]
