"""Objects made in both branches of an `if` (resume from a checkpoint or start afresh), with
the checkpoint loaded into the plain objects inside the resuming branch: a load sets state and
runs nothing, so prepare goes after the whole `if`, as it would after a load at the top level
(setup_uses.py). A forward inside the branch still keeps the refusal."""

from __future__ import annotations

import re

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

RESUMING = """\
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def load_checkpoint(path, model, optimizer):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["epoch"]


def main(resume):
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8)
    model = nn.Linear(4, 2)
    if resume:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        start = load_checkpoint(resume, model, optimizer)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        start = 0
    for epoch in range(start, 3):
        batches = 0
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            batches += 1
        print("epoch", epoch, "batches", batches)


main(sys.argv[1] if len(sys.argv) > 1 else None)
"""


def test_prepare_goes_after_the_if_whose_branch_loads_the_checkpoint():
    output, findings = migrate_text(RESUMING)
    assert output is not None, [f.message for f in findings]
    assert (
        "        start = 0\n"
        "\n"
        "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "    for epoch in range(start, 3):\n"
    ) in output
    # the load keeps the plain objects, as in the original
    assert "        start = load_checkpoint(resume, model, optimizer)\n" in output


def test_a_forward_inside_the_branch_still_needs_a_human():
    source = RESUMING.replace(
        "        start = load_checkpoint(resume, model, optimizer)\n",
        "        start = load_checkpoint(resume, model, optimizer)\n"
        "        print(model(torch.zeros(1, 4)))\n",
    )
    output, findings = migrate_text(source)
    assert output is None
    assert [f.code for f in findings if f.needs_human] == ["MIG900"]


@pytest.mark.parametrize("resuming", [False, True], ids=["fresh", "resumed"])
def test_the_migrated_script_runs_on_two_processes(tmp_path, resuming):
    output, _findings = migrate_text(RESUMING)
    script = tmp_path / "resuming.py"
    script.write_text(output)
    args = []
    if resuming:
        import torch

        model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 1}
        torch.save(state, tmp_path / "last.pt")
        args = [str(tmp_path / "last.pt")]
    out = launch(script, tmp_path, *args).stdout
    # 32 samples, batch 8, two processes: 2 batches each, printed once per epoch
    epochs = ["1", "2"] if resuming else ["0", "1", "2"]
    assert re.findall(r"^epoch (\d) batches 2$", out, re.MULTILINE) == epochs, out
