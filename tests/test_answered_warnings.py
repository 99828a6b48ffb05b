"""A MIG031 warning that MIG032 answers is not shown (h8 review, bert fine-tuning): MIG031 warns
on the input that `correct += (preds == labels).sum().item()` counts only this process's
batches; MIG032, on the migrated text, then reduces `correct` (and `total`, `total_loss`) over
the processes after the loop, so the numbers count every process's batches and the warning
(exit 1, "gather by hand") was untrue. A warning on a sum MIG032 does not reduce stays."""

from __future__ import annotations

import ast

import pytest

from migrator.engine import migrate_text
from migrator.findings import Finding
from migrator.soundness.positions import answered

EVALUATED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64,))), batch_size=8)
val = DataLoader(TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40,))), batch_size=8)


def evaluate(model, loader):
    model.eval()
    total_loss = 0.0
    correct = 0
    total = 0
    with torch.no_grad():
        for x, labels in loader:
            logits = model(x)
            loss = loss_fn(logits, labels)
            @LOSS@
            preds = torch.argmax(logits, dim=1)
            @CORRECT@
            total += labels.size(0)
    return total_loss / total, correct / total


for epoch in range(2):
    model.train()
    for x, y in train:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    val_loss, acc = evaluate(model, val)
    print(f"epoch {epoch} val {val_loss:.4f} acc {acc:.3f}")
"""


def program(loss: str, correct: str) -> str:
    return EVALUATED.replace("@LOSS@", loss).replace("@CORRECT@", correct)


@pytest.mark.parametrize(
    ("loss", "correct"),
    [
        ("total_loss += loss.item() * labels.size(0)", "correct += (preds == labels).sum().item()"),
        (
            "total_loss += loss.item() * len(labels)",
            "correct += (preds == labels).float().sum().item()",
        ),
        ("total_loss += float(loss) * len(labels)", "correct += int((preds == labels).sum())"),
    ],
)
def test_sums_reduced_after_the_loop_answer_the_warnings(loss, correct):
    out, findings = migrate_text(program(loss, correct))
    for name in ("total_loss", "correct", "total"):
        assert f"{name} = accelerator.reduce(torch.tensor({name}, " in out, out
    assert not [f for f in findings if f.code == "MIG031" and f.needs_human], findings
    assert any(f.code == "MIG032" for f in findings)  # what it reduced is said


SUMS = """\
total = 0
count = 0
for x in loader:
    total += x.sum().item()
    count = count + len(x)
print(total / count)
"""


def warning_at(tree: ast.Module, line: int, level: str = "warning") -> Finding:
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line)
    return Finding(code="MIG031", message="counts only this process's batches", node=node,
                   level=level)  # fmt: skip


@pytest.mark.parametrize(
    ("line", "sums", "kept"),
    [
        (4, [(3, 5, "total")], False),  # `total +=` in the loop whose `total` was reduced
        (5, [(3, 5, "count")], False),  # `count = count + ...`, the same sum spelt out
        (4, [(3, 5, "count")], True),  # another sum of the loop was reduced, not this one
        (4, [(6, 6, "total")], True),  # reduced, but after another loop
    ],
)
def test_only_the_warnings_on_the_sums_reduced_go(line, sums, kept):
    tree = ast.parse(SUMS)
    finding = warning_at(tree, line)
    assert (answered([finding], tree, sums, SUMS, SUMS) == [finding]) is kept


def test_notes_and_other_codes_stay():
    tree = ast.parse(SUMS)
    note = warning_at(tree, 4, level="note")
    other = warning_at(tree, 4)
    other.code = "MIG030"
    assert answered([note, other], tree, [(3, 5, "total")], SUMS, SUMS) == [note, other]
