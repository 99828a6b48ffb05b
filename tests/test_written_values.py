"""The soundness check's per-process note covers what a program writes down for later as
well as what it prints: a CSV row (`rows.writerow([epoch, score])`), a plot's data
(`plt.plot(scores)`, `ax.plot(...)`), main-only writes included - process 0's own value
there is no more the 1-process number than in a print."""

from __future__ import annotations

from migrator.engine import migrate_text

WRITTEN = """\
import csv

import matplotlib.pyplot as plt
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scores = []
for epoch in range(2):
    for x, y in loader:
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    score = out.abs().max().item()
    scores.append(score)
    {sink}
"""
SINKS = {
    "a CSV row": 'with open("log.csv", "a") as handle:\n        csv.writer(handle).writerow([epoch, score])',
    "a plot": 'plt.plot(scores)\n    plt.savefig("scores.png")',
    "an axes plot": 'figure, ax = plt.subplots()\n    ax.plot(scores)\n    figure.savefig("s.png")',
}


def test_a_per_process_value_written_down_is_noted_like_a_print():
    for case, sink in SINKS.items():
        output, findings = migrate_text(WRITTEN.format(sink=sink))
        assert output is not None, (case, [f.message for f in findings])
        notes = [f.message for f in findings if f.code == "MIG953"]
        assert any("written here is this process's own value" in n for n in notes), case


def test_a_value_every_process_holds_alike_is_written_without_a_note():
    sink = 'with open("log.csv", "a") as handle:\n        csv.writer(handle).writerow([epoch, len(loader)])'
    _output, findings = migrate_text(WRITTEN.format(sink=sink).replace("len(loader)", "epoch * 2"))
    assert not [f for f in findings if "written here" in f.message]
