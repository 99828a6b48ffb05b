"""MIG006 and a DataLoader re-bound to the user's wrapper before training
(`loader = DeviceLoader(loader, fn)`): prepare would pass the wrapper through unsharded, so
the DataLoader is prepared on its own before it is wrapped; a wrap under a branch is refused."""

from __future__ import annotations

from migrator.engine import migrate_text

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers import DeviceLoader, to_device

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
loader = DeviceLoader(loader, to_device, device)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_loader_rebound_to_a_wrapper_is_prepared_before_the_wrap():
    output, findings = migrate_text(SCRIPT)
    assert output is not None
    assert (
        "loader = accelerator.prepare(loader)\nloader = DeviceLoader(loader, to_device, device)\n"
    ) in output
    assert "model, optimizer = accelerator.prepare(model, optimizer)\n" in output
    assert [f.code for f in findings if f.needs_human] == []


def test_a_wrap_under_a_branch_is_refused_by_name():
    text = SCRIPT.replace(
        "loader = DeviceLoader(loader, to_device, device)\n",
        "if device.type == 'cuda':\n    loader = DeviceLoader(loader, to_device, device)\n",
    )
    output, findings = migrate_text(text)
    assert output is None
    assert [(f.code, f.line) for f in findings] == [("MIG900", 11), ("MIG950", 11)]
    assert "`loader` (the DataLoader made at line 9) is re-bound to `DeviceLoader(...)` at " in (
        findings[0].message
    )


def test_a_wrapper_under_another_name_is_not_this_refusal():
    text = SCRIPT.replace("loader = DeviceLoader(loader,", "batches = DeviceLoader(loader,")
    _, findings = migrate_text(text.replace("in loader:", "in batches:"))
    assert not any("re-bound" in f.message for f in findings)


LISTED = """\
import torch


def load_batches(count):
    batches = []
    for _ in range(count):
        batches.append((torch.randn(4, 4), torch.randn(4, 1)))
    return batches, count


def train():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batches, count = load_batches(8)
    model = torch.nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in batches:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


train()
"""


def test_a_list_of_batches_from_a_helper_is_not_prepared_and_keeps_its_placement():
    output, findings = migrate_text(LISTED)
    assert output is not None
    assert "    model, optimizer = accelerator.prepare(model, optimizer)\n" in output
    assert "            x, y = x.to(device), y.to(device)\n" in output
    notes = [f for f in findings if f.code == "MIG905"]
    assert "    device = accelerator.device\n" in output
    assert len(notes) == 1 and notes[0].line == 13
    assert "`batches` is a Python list of batches (built at line 5 in `load_batches()`)" in (
        notes[0].message
    )
