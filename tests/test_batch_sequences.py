"""A training loop over a Python sequence of batches - `list(zip(x.split(64), y.split(64)))`, a
list comprehension, `torch.chunk(...)`, `list(loader)` - draws from no DataLoader: `prepare`
would hand the sequence back as it is and every process would iterate all of it. It is
migrated as loader-less training (MIG905's note: no sharding, the batches stay where the
script's `.to(...)` puts them), never prepared as a loader with a note saying it is sharded."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

TEMPLATE = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def train(model, device, batches, optimizer, epoch):
    model.train()
    for step, (x, y) in enumerate(batches):
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    inputs, labels = torch.randn(256, 10), torch.randint(0, 3, (256,))
    {made}
    model = torch.nn.Linear(10, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        train(model, device, batches, optimizer, epoch)


main()
"""

SEQUENCES = {
    "list of zipped splits": "batches = list(zip(inputs.split(64), labels.split(64)))",
    "tuple of zipped chunks": "batches = tuple(zip(torch.chunk(inputs, 4), torch.chunk(labels, 4)))",
    "list comprehension": (
        "batches = [(inputs[i:i + 64], labels[i:i + 64]) for i in range(0, 256, 64)]"
    ),
    "a loader's batches drawn once": (
        "batches = list(DataLoader(TensorDataset(inputs, labels), batch_size=64))"
    ),
}


@pytest.mark.parametrize("case", SEQUENCES)
def test_a_sequence_of_batches_is_not_prepared_as_a_loader(case):
    output, findings = migrate_text(TEMPLATE.format(made=SEQUENCES[case]))
    assert output is not None, (case, [f.message for f in findings])
    assert "model, optimizer = accelerator.prepare(model, optimizer)" in output, output
    assert "batches = accelerator.prepare" not in output
    assert ", batches" not in output.split("accelerator.prepare(", 1)[1].split(")", 1)[0]
    assert "x, y = x.to(device), y.to(device)" in output  # placed by the script, as before
    codes = {f.code for f in findings}
    assert "MIG905" in codes, [f.message for f in findings]
    assert not any(f.code == "MIG006" and "is prepared" in f.message for f in findings)


def test_the_same_loop_over_a_dataloader_is_prepared():
    made = "batches = DataLoader(TensorDataset(inputs, labels), batch_size=64, shuffle=True)"
    output, findings = migrate_text(TEMPLATE.format(made=made))
    assert output is not None, [f.message for f in findings]
    assert "accelerator.prepare(\n        model, optimizer, batches\n    )" in output or (
        "model, optimizer, batches = accelerator.prepare(model, optimizer, batches)" in output
    ), output
    assert "MIG905" not in {f.code for f in findings}
