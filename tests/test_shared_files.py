"""A file the main process alone writes once migrated and every process then reads gets
`accelerator.wait_for_everyone()` before the read; so does a folder the main process removes
and every process then writes into (shared_files.py; the held-out review: a tester module
loading the trained model, a notebook loading the best checkpoint, a VAE's output folder)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

TRAIN = """\
import os
import shutil

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

BEST = "best.pt"


def train(model, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    best = float("inf")
    for epoch in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
{write}


model = torch.nn.Linear(4, 1)
train(model, 2)
{read}
"""


@pytest.mark.parametrize(
    ("write", "read", "before"),
    [
        # a save under a per-epoch test, loaded at module level (a notebook's last cell)
        (("        if loss.item() < best:\n            best = loss.item()\n"
         "            torch.save(model.state_dict(), BEST)"),
         "model.load_state_dict(torch.load(BEST))", "model.load_state_dict(torch.load(BEST))"),
        # the same file under another name bound to the same string
        ("        torch.save(model.state_dict(), 'weights/last.pt')",
         "path = 'weights/last.pt'\nstate = torch.load(path)", "state = torch.load(path)"),
        ("        np.save('stats.npy', np.zeros(3))",
         "stats = np.load('stats.npy')", "stats = np.load('stats.npy')"),
        ("        with open('log.txt', 'w') as f:\n            f.write(str(epoch))",
         "lines = open('log.txt').read()", "lines = open('log.txt').read()"),
        # a read some process may skip: the wait goes before the `if`
        ("        torch.save(model.state_dict(), BEST)",
         "if os.path.exists(BEST):\n    model.load_state_dict(torch.load(BEST))",
         "if os.path.exists(BEST):"),
        # one path spelled over several lines, and with other quotes (h12: an LSTM class's
        # best checkpoint reloaded after training)
        ("        torch.save(model.state_dict(), os.path.join(\n            'out', 'best.pth'))",
         'state = torch.load(\n    os.path.join(\n        "out",\n        "best.pth"))',
         "state = torch.load("),
        ("        torch.save(model.state_dict(), f'run_{BEST}/m.pt')",
         "state = torch.load(f\"run_{BEST}/m.pt\")", "state = torch.load(f\"run_{BEST}/m.pt\")"),
        # inside the script guard, not before it (the training runs there)
        ("        torch.save(model.state_dict(), BEST)",
         "if __name__ == '__main__':\n    model.load_state_dict(torch.load(BEST))",
         "    model.load_state_dict(torch.load(BEST))"),
    ],
)  # fmt: skip
def test_every_process_waits_before_reading_what_the_main_process_wrote(write, read, before):
    output, findings = migrate_text(TRAIN.format(write=write, read=read))
    assert output is not None, findings
    indent = before[: len(before) - len(before.lstrip())]
    assert f"{indent}accelerator.wait_for_everyone()\n{before}\n" in output
    assert output.count("wait_for_everyone") == 1


@pytest.mark.parametrize(
    ("write", "read"),
    [
        ("        torch.save(model.state_dict(), BEST)", "print(os.path.exists('other.pt'))"),
        ("        torch.save(model.state_dict(), BEST)", "x = torch.load('other.pt')"),
        ("        torch.save(model.state_dict(), f'ckpt_{torch.distributed.get_rank()}.pt')",
         "x = torch.load(f'ckpt_{torch.distributed.get_rank()}.pt')"),  # each process's own
    ],
)  # fmt: skip
def test_no_wait_where_nothing_reads_a_shared_write(write, read):
    output, findings = migrate_text(TRAIN.format(write=write, read=read))
    assert output is not None, findings
    assert "wait_for_everyone" not in output


def test_a_write_and_a_read_in_the_two_branches_of_one_if_need_no_wait():
    source = TRAIN.format(write="        pass", read="").replace(
        "model = torch.nn.Linear(4, 1)\ntrain(model, 2)\n",
        "model = torch.nn.Linear(4, 1)\nif os.environ.get('MODE') == 'train':\n"
        "    train(model, 2)\n    torch.save(model.state_dict(), BEST)\nelse:\n"
        "    model.load_state_dict(torch.load(BEST))\n",
    )
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert "wait_for_everyone" not in output


REMOVED = """\
import os
import shutil

import torch
from torch.utils.data import DataLoader, TensorDataset


def main(out):
    if os.path.exists(out):
        shutil.rmtree(out)
    {after}
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


main("runs")
"""


@pytest.mark.parametrize(
    "after",
    ["os.makedirs(out)", "os.makedirs(out, exist_ok=True)",
     "os.mkdir(os.path.join(out, 'figures'))"],
)  # fmt: skip
def test_a_folder_removed_by_the_main_process_is_waited_for_before_it_is_made_again(after):
    output, findings = migrate_text(REMOVED.format(after=after))
    assert output is not None, findings
    assert (
        "    if os.path.exists(out):\n"
        "        if accelerator.is_main_process:\n"
        "            shutil.rmtree(out)\n"
        "    accelerator.wait_for_everyone()\n"
    ) in output


def test_a_folder_removed_and_not_written_again_needs_no_wait():
    output, findings = migrate_text(REMOVED.format(after="print(out)"))
    assert output is not None, findings
    assert "wait_for_everyone" not in output


@pytest.mark.parametrize(
    "reader",
    [
        (
            "def read_stats(batch):\n    stats = np.load('stats.npy')\n    return batch\n\n\n"
            "probe = DataLoader(TensorDataset(torch.randn(8, 4)), collate_fn=read_stats)\n"
        ),
        (
            "class Stats(torch.utils.data.Dataset):\n    def __len__(self):\n        return 8\n\n"
            "    def __getitem__(self, i):\n        return np.load('stats.npy')[i % 3]\n\n\n"
            "probe = DataLoader(Stats())\n"
        ),
    ],
)
def test_no_wait_in_code_a_loader_runs_per_item(reader):
    """A read in a `collate_fn` or a Dataset's `__getitem__` (h9 parser: two barriers in its
    collate function): a barrier there would meet the others once per batch, or run in a
    loader's worker, which has no process group."""
    write = "        np.save('stats.npy', np.zeros(3))"
    output, findings = migrate_text(TRAIN.format(write=write, read=reader))
    assert output is not None, findings
    assert "wait_for_everyone" not in output
