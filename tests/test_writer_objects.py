"""MIG030 on writers made on a log file (`rows = csv.writer(log)`, `csv.DictWriter(log,
fieldnames)`): the file, the writer and every statement calling their methods go under the
main-process guard together, so the CSV is written once; a writer used otherwise leaves the
file to the user with a note. And tqdm's own print (`tqdm.write(...)`, in its spellings) runs
on the main process only."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

PROGRAM = """\
import csv

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
handle = open("metrics.csv", "w", newline="")
{make}
for epoch in range(3):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    {row}
    handle.flush()
handle.close()
"""

SPELLINGS = [
    ('rows = csv.writer(handle)\nrows.writerow(["epoch", "steps"])', "rows.writerow([epoch, 4])"),
    (
        'rows = csv.DictWriter(handle, fieldnames=["epoch", "steps"])\nrows.writeheader()',
        'rows.writerow({"epoch": epoch, "steps": 4})',
    ),
]


def _migrate(make: str, row: str) -> tuple[str, list[str]]:
    output, findings = migrate_text(PROGRAM.format(make=make, row=row))
    assert output is not None, [f.message for f in findings]
    return output, [f.code for f in findings]


@pytest.mark.parametrize(("make", "row"), SPELLINGS)
def test_a_csv_writer_on_a_log_file_is_made_and_used_on_the_main_process(make, row):
    output, codes = _migrate(make, row)
    first, second = make.splitlines()
    guarded = (
        "if accelerator.is_main_process:\n"
        '    handle = open("metrics.csv", "w", newline="")\n'
        f"    {first}\n    {second}\n"
    )
    assert guarded in output
    assert f"    if accelerator.is_main_process:\n        {row}\n        handle.flush()\n" in output
    assert "if accelerator.is_main_process:\n    handle.close()\n" in output
    assert "MIG030" not in codes  # nothing left to the user


def test_a_writer_used_beyond_its_methods_is_refused_with_a_note():
    # `writers = [rows]`: the writer would not exist on the other processes
    make, row = SPELLINGS[0]
    output, findings = migrate_text(PROGRAM.format(make=make + "\nwriters = [rows]", row=row))
    assert output is None
    codes = [f.code for f in findings]
    assert "MIG952" in codes and "MIG950" in codes
    assert any(
        f.code == "MIG030" and "`handle` is used beyond calls of its methods" in f.message
        for f in findings
    )


def test_two_processes_write_the_csv_once(tmp_path):
    output, _ = _migrate(*SPELLINGS[0])
    (tmp_path / "migrated.py").write_text(output)
    launch(tmp_path / "migrated.py", tmp_path)
    assert (tmp_path / "metrics.csv").read_text().splitlines() == [
        "epoch,steps",
        "0,4",
        "1,4",
        "2,4",
    ]


BAR_PRINTS = """\
import tqdm as progress
import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm


def train():
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in tqdm(loader):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if epoch > 5: progress.tqdm.write("late")
        tqdm.write(f"epoch {epoch}")
        progress.tqdm.write("done"); print("both")


train()
"""


def test_tqdms_own_print_runs_on_the_main_process():
    output, _ = migrate_text(BAR_PRINTS)
    assert output is not None
    assert (
        '        if accelerator.is_main_process:\n            tqdm.write(f"epoch {epoch}")\n'
        in (output)
    )
    # where no statement of its own can be guarded: the accelerator's print
    assert 'if epoch > 5: accelerator.print("late")' in output
    assert 'accelerator.print("done"); accelerator.print("both")' in output


def test_a_figure_shown_on_every_process_is_shown_on_the_main_process():
    source = BAR_PRINTS.replace(
        "import tqdm as progress\n", "import matplotlib.pyplot as plt\nimport tqdm as progress\n"
    ).replace(
        '        tqdm.write(f"epoch {epoch}")\n', "        plt.plot([epoch])\n        plt.show()\n"
    )
    output, _ = migrate_text(source)
    assert output is not None
    assert "        if accelerator.is_main_process:\n            plt.show()\n" in output
