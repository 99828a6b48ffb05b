"""A file or program left as it is says so once and narrates no rewrite it did not write
(SPEC §3b.8): its warnings say why (and what a migration needs by hand); the notes that
explained choices of the abandoned rewrite ("now prepares", "DataParallel removed", "the
Accelerator gets no cpu=", "scheduler not prepared") are dropped; one MIG950 note, on the line
of the first warning, says it is left as it is and that this finding blocks it. A migrated file
keeps its notes, and so does a file left unchanged with no warning (nothing blocked it)."""

from __future__ import annotations

import json
import textwrap

import pytest

from migrator.engine import migrate_text
from migrator.findings import LEFT_AS_IT_IS
from tests.test_programs import run_cli

SINGLE = """\
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
    model = torch.nn.DataParallel(torch.nn.Linear(3, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    for epoch in range(5):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
{ending}
    torch.save(model.module.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
"""

# each ending leaves the file as it is: a decision on this process's own loss
REFUSING = [
    "        if loss.item() < 0.01:\n            break",
    "        if loss.item() < 0.01:\n            return",
    "        stop = loss.item() < 0.01\n        if stop:\n            break",
]


@pytest.mark.parametrize("ending", REFUSING)
def test_a_refused_file_keeps_its_reasons_and_says_it_is_left_once(ending):
    source = SINGLE.format(ending=ending)
    output, findings = migrate_text(source)
    assert output is None
    warnings = [f for f in findings if f.needs_human]
    assert warnings and all(f.code == "MIG953" for f in warnings)
    notes = [f for f in findings if not f.needs_human]
    assert [f.code for f in notes] == [LEFT_AS_IT_IS], [f.message for f in notes]
    left = notes[0]
    first = min(warnings, key=lambda f: (f.line, f.col))
    assert (left.line, left.col) == (first.line, first.col)
    assert "this file is left as it is" in left.message and "MIG953" in left.message


def test_the_same_file_migrated_keeps_the_notes_of_its_rewrite():
    output, findings = migrate_text(SINGLE.format(ending="        pass"))
    assert output is not None
    codes = {f.code for f in findings}
    assert {"MIG901", "MIG006"} <= codes  # DataParallel removed, the scheduler left plain
    assert LEFT_AS_IT_IS not in codes


def test_a_detector_s_refusal_says_it_is_left_at_its_finding():
    source = (
        SINGLE.format(ending="        pass")
        .replace(
            "torch.nn.DataParallel(torch.nn.Linear(3, 1)).to(device)",
            "torch.nn.Linear(3, 1).cuda(1)",
        )
        .replace("model.module.state_dict()", "model.state_dict()")
    )
    output, findings = migrate_text(source)
    assert output is None
    assert [f.code for f in findings] == ["MIG902", LEFT_AS_IT_IS]
    assert findings[0].line == findings[1].line == 13


def test_an_unchanged_file_nothing_blocked_keeps_its_notes():
    """Hogwild: processes started by hand with no process group; not ours, said in a note,
    and no warning blocked anything: no MIG950."""
    source = textwrap.dedent("""\
        import torch
        import torch.multiprocessing as mp


        def train(model):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for step in range(10):
                loss = model(torch.randn(4, 3)).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            model = torch.nn.Linear(3, 1)
            model.share_memory()
            workers = [mp.Process(target=train, args=(model,)) for _ in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        """)
    output, findings = migrate_text(source)
    assert output is None
    assert findings and not [f for f in findings if f.needs_human]
    assert LEFT_AS_IT_IS not in {f.code for f in findings}


ENTRY = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from engine import train_one_epoch


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
    model = torch.nn.Linear(3, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    for epoch in range(3):
        train_one_epoch(model, loader, optimizer, device)
        scheduler.step()


if __name__ == "__main__":
    main()
"""

ENGINE = """\
import torch


def train_one_epoch(model, loader, optimizer, device, patience=0.01):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        {ending}
    return True
"""


@pytest.mark.parametrize(
    "ending",
    ["if loss.item() < patience:\n            return False",
     "if loss.item() < patience:\n            break"],
)  # fmt: skip
def test_a_refused_program_says_it_is_left_once_where_it_is_blocked(
    ending, tmp_path, monkeypatch, capsys
):
    (tmp_path / "main.py").write_text(ENTRY)
    (tmp_path / "engine.py").write_text(ENGINE.format(ending=ending))
    code, report = run_cli(tmp_path, monkeypatch, capsys, "main.py", mode="check")
    assert code == 1
    by_file = {item["path"]: item["findings"] for item in report["files"]}
    assert all(not item["changed"] for item in report["files"]), json.dumps(report)
    engine = [(f["code"], f["level"]) for f in by_file["engine.py"]]
    assert engine == [("MIG953", "warning"), (LEFT_AS_IT_IS, "note")]
    left = by_file["engine.py"][1]
    assert "the program of main.py (main.py, engine.py) is left as it is" in left["message"]
    # the entry's scheduler note narrated the rewrite not written: gone; it points at engine.py
    main = by_file["main.py"]
    assert [(f["code"], f["level"]) for f in main] == [("MIG910", "note")]
    assert "engine.py" in main[0]["message"]


def test_a_refused_notebook_says_it_is_left_in_the_cell_of_its_blocking_finding():
    from migrator.engine import Options
    from migrator.notebook import migrate_notebook

    source = SINGLE.format(ending=REFUSING[0])
    head, rest = source.split("def main():\n")
    cells = [head, "def main():\n" + rest]
    document = {
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": cell, "execution_count": None,
             "outputs": []}
            for cell in cells
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    result = migrate_notebook(json.dumps(document).encode(), "train.ipynb", Options())
    assert result.error is None and not result.changed
    warning = next(f for f in result.findings if f.needs_human)
    left = next(f for f in result.findings if f.code == LEFT_AS_IT_IS)
    assert (left.cell, left.line, left.col) == (warning.cell, warning.line, warning.col)
    assert left.cell == 2


WRITER = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.tensorboard import SummaryWriter


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
    model = torch.nn.Linear(3, 1).to("cuda" if torch.cuda.is_available() else "cpu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = SummaryWriter("runs")
    print("logging to", writer.log_dir)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        writer.add_scalar("loss", loss.item(), epoch)


if __name__ == "__main__":
    main()
"""


def test_the_lines_a_refusal_names_are_the_input_s():
    """The check reads the migrated text, four lines longer above `main()`'s call: the
    message names the call's line in the file the user has."""
    output, findings = migrate_text(WRITER)
    assert output is None
    [refusal] = [f for f in findings if f.needs_human]
    call = WRITER.splitlines().index("    main()") + 1
    assert f"in `main()`, called at line {call} would run" in refusal.message
    # what to do by hand stays; the per-process note on the migrated text does not
    assert sorted(f.code for f in findings) == ["MIG030", LEFT_AS_IT_IS, "MIG952"]
