"""A call that leaves out a parameter defaulting to None passes no object there: a helper called
once without its scheduler and once with it prepares the scheduler where the objects meet (not
only for a train/eval epoch function, test_owners.py). A GradScaler parameter left out keeps
MIG020's handling (the refusal naming both calls)."""

from __future__ import annotations

import re

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch
from tests.test_owners import changed

OMITTED = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, optimizer, scheduler=None, epochs=1):
    model.train()
    for _ in range(epochs):
        batches = 0
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            batches += 1
            if scheduler is not None:
                scheduler.step()
        print("batches", batches)


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    train(model, loader, optimizer)
    train(model, loader, optimizer, scheduler, epochs=2)
    print("weights", round(model.weight.sum().item(), 6))


main()
"""

SCALED = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, optimizer, scaler=None):
    for inputs, labels in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", enabled=scaler is not None):
            loss = nn.functional.cross_entropy(model(inputs), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()


def main():
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.cuda.amp.GradScaler()
    train(model, loader, optimizer)
    train(model, loader, optimizer, scaler)


main()
"""


def test_a_scheduler_one_call_leaves_out_is_prepared_where_the_objects_meet():
    output, findings = migrate_text(OMITTED)
    assert output is not None, [f.message for f in findings]
    assert not [f for f in findings if f.needs_human]
    removed, added = changed(OMITTED, output)
    assert removed == [
        "            loss.backward()",
        '        print("batches", batches)',
        '    print("weights", round(model.weight.sum().item(), 6))',
    ]
    assert added == [
        "from runtime import Accelerator",
        "",
        "accelerator = Accelerator()",
        "            accelerator.backward(loss)",
        '        accelerator.print("batches", batches)',
        "",
        "    model, optimizer, loader, scheduler = accelerator.prepare(",
        "        model, optimizer, loader, scheduler",
        "    )",
        '    accelerator.print("weights", round(accelerator.unwrap_model(model).weight.sum().item(), 6))',
    ]
    # prepared after the scheduler is made, before the first call
    assert output.index("accelerator.prepare(") > output.index("scheduler = torch.optim")
    assert output.index("accelerator.prepare(") < output.index(
        "    train(model, loader, optimizer)"
    )


def test_the_scaler_one_call_leaves_out_keeps_the_refusal_naming_both_calls():
    output, findings = migrate_text(SCALED)
    assert output is None
    refusals = [f for f in findings if f.needs_human]
    assert [f.code for f in refusals] == ["MIG900"]
    assert "the calls pass `nothing` at line 26, `scaler` at line 27" in refusals[0].message


def test_the_omitted_scheduler_runs_on_two_processes(tmp_path):
    output, _findings = migrate_text(OMITTED)
    script = tmp_path / "omitted.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # 32 samples, batch 8, two processes: 2 batches each, three epochs, printed once
    assert re.findall(r"^batches (\d+)$", out, re.MULTILINE) == ["2", "2", "2"], out
    assert len(re.findall(r"^weights -?[0-9.]+$", out, re.MULTILINE)) == 1, out
