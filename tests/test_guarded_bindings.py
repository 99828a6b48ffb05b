"""MIG030's main-process guard covers a file write whole; a write that also binds a name the
code after it reads on every process (`class_names` set up inside `with open(log, "w")` and
zipped with the metrics each epoch) cannot go under it: the name would not exist on the other
processes. It is left, with a note, and the soundness check refuses the file (MIG952)."""

from __future__ import annotations

from migrator.engine import migrate_text

LOGGED = """\
import csv

import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 3)), batch_size=4)
model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
with open("log.csv", "w", newline="") as handle:
    rows = csv.writer(handle)
    class_names = ["a", "b", "c"]
    rows.writerow(["epoch"] + class_names)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    {after}
"""


def test_a_write_binding_what_later_code_reads_is_left_and_refused():
    output, findings = migrate_text(LOGGED.format(after="print(dict(zip(class_names, [1, 2, 3])))"))
    assert output is None
    note = next(f for f in findings if f.code == "MIG030")
    assert "also binds `class_names`" in note.message
    assert any(f.code == "MIG952" for f in findings)


def test_a_write_whose_names_stay_inside_is_guarded_whole():
    output, findings = migrate_text(LOGGED.format(after='print("epoch", epoch)'))
    assert output is not None, [f.message for f in findings]
    assert (
        'if accelerator.is_main_process:\n    with open("log.csv", "w", newline="") as handle:\n'
        in output
    )


def test_opening_the_null_device_writes_nothing_to_guard():
    """`sys.stdout = open(os.devnull, "w")` on every process writes no file: no guard, no
    refusal (a quiet-worker idiom of hand-written DDP scripts)."""
    source = LOGGED.format(after="pass").replace(
        'with open("log.csv", "w", newline="") as handle:\n'
        "    rows = csv.writer(handle)\n"
        '    class_names = ["a", "b", "c"]\n'
        '    rows.writerow(["epoch"] + class_names)\n',
        'import os\nimport sys\n\nsys.stdout = open(os.devnull, "w")\n',
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert 'sys.stdout = open(os.devnull, "w")\n' in output
    assert "is_main_process" not in output
