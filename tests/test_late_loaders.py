"""An evaluation loader made after training, in the function that trains (a held-out sample
run through the trained model at the end): it is prepared on its own right where it is made,
as the other loaders are before training, instead of refusing because it is defined after the
first use of the others."""

from __future__ import annotations

import re

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

LATE = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
    sample = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    sample_loader = DataLoader(sample, batch_size=4)
    model.eval()
    seen = 0
    with torch.no_grad():
        for inputs, labels in sample_loader:
            seen += labels.shape[0]
            model(inputs)
    print("seen", seen)


main()
"""


def test_the_late_loader_is_prepared_where_it_is_made():
    output, findings = migrate_text(LATE)
    assert output is not None, [f.message for f in findings]
    assert (
        "    sample_loader = DataLoader(sample, batch_size=4)\n"
        "    sample_loader = accelerator.prepare(sample_loader)\n"
    ) in output
    assert (
        "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n" in output
    )


def test_the_late_loader_runs_sharded_on_two_processes(tmp_path):
    output, _findings = migrate_text(LATE)
    script = tmp_path / "late.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # the sample's 16 rows split over two processes; the count is reduced across them
    assert re.findall(r"^seen (\d+)$", out, re.MULTILINE) == ["16"], out
