"""Per-batch numbers a helper of the file returns (`batch_loss, correct = test_step(x, y)`,
each `.item()` inside): `gather_for_metrics` of Python numbers crashed the unpacking on two
processes (h10 review, a notebook); they are all-reduced as numbers, the batch tensor beside
them gathered."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

EVALUATED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = torch.nn.CrossEntropyLoss()
train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64,))), batch_size=8)
test = DataLoader(TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40,))), batch_size=8)


def test_step(inputs, targets):
    with torch.no_grad():
        outputs = model(inputs)
@BODY@


for epoch in range(2):
    for inputs, targets in train:
        loss = criterion(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    test_loss, test_total, test_correct = 0.0, 0, 0
    for inputs, targets in test:
        batch_loss, correct = test_step(inputs, targets)
        test_loss += batch_loss
        test_total += targets.size(0)
        test_correct += correct
    print(epoch, test_loss, test_correct / test_total)
"""


@pytest.mark.parametrize(
    "body",
    [
        (
            "        batch_loss = criterion(outputs, targets).item()\n"
            "        correct = outputs.argmax(1).eq(targets).sum().item()\n"
            "        return batch_loss, correct"
        ),
        "        return criterion(outputs, targets).item(), float((outputs.argmax(1) == targets).sum())",
    ],
)
def test_numbers_a_helper_returns_are_reduced_not_gathered(body):
    out, findings = migrate_text(EVALUATED.replace("@BODY@", body))
    assert out is not None, findings
    assert "gather_for_metrics((batch_loss" not in out
    for name in ("batch_loss", "correct"):
        assert f"{name} = accelerator.reduce(torch.tensor({name}, " in out, out
    assert "targets = accelerator.gather_for_metrics(targets)" in out


def test_a_helper_returning_tensors_is_still_gathered():
    body = "        return outputs.argmax(1), targets"
    source = (
        EVALUATED.replace("@BODY@", body)
        .replace(
            "batch_loss, correct = test_step(inputs, targets)\n        test_loss += batch_loss\n",
            "predicted, labels = test_step(inputs, targets)\n        test_loss += 0\n",
        )
        .replace("test_correct += correct", "test_correct += (predicted == labels).sum().item()")
    )
    out, findings = migrate_text(source)
    assert out is not None, findings
    assert "accelerator.gather_for_metrics((predicted, labels" in out, out
