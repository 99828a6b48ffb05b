"""A parameter one call fills with the training object and another with `None`
(`run(model, val_loader, None)`: evaluate, no optimizer) comes from the one object: `None` is
no second origin (a step on it would fail in the original too). The object is prepared where it
is made; the call passing `None` is left as it is."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

TEMPLATE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def run(model, loader, optimizer):
    total = 0.0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        if {test}:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total += loss.item()
    return total / len(loader)


def main():
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    train_loader = DataLoader(data, batch_size=8, shuffle=True)
    val_loader = DataLoader(data, batch_size=8)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_loss = run(model, train_loader, optimizer)
        with torch.no_grad():
            val_loss = {evaluate}
        print(epoch, train_loss, val_loss)


main()
"""

SPELLINGS = {
    "positional None, is-not test": ("optimizer is not None", "run(model, val_loader, None)"),
    "keyword None, truth test": ("optimizer", "run(model, val_loader, optimizer=None)"),
}


@pytest.mark.parametrize("case", SPELLINGS)
def test_a_none_passed_for_the_optimizer_is_no_second_origin(case):
    test, evaluate = SPELLINGS[case]
    output, findings = migrate_text(TEMPLATE.format(test=test, evaluate=evaluate))
    assert output is not None, (case, [f.message for f in findings])
    assert "optimizer = accelerator.prepare(" in output or ", optimizer," in output, output
    assert "accelerator.backward(loss)" in output
    assert evaluate in output  # the evaluation call keeps passing None
    assert not any(f.code == "MIG900" for f in findings)
