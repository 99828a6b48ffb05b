"""A function that makes the optimizer and loaders and receives the model, stepping through a
GradScaler (`grad_scaler.step(optimizer)`), called twice from the script's `__main__` with
`amp=args.amp`: the objects meet in the function (the scaler's step names the optimizer),
the Accelerator is made at module level reading what every call passes (`args.amp`), and the
second call's prepare of the already-prepared model is safe on our runtime."""

from __future__ import annotations

import re

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

SCALED = """\
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_model(model, device, epochs=1, amp=False):
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    grad_scaler = torch.cuda.amp.GradScaler(enabled=amp)
    for epoch in range(epochs):
        batches = 0
        for inputs, labels in loader:
            inputs, labels = inputs.to(device), labels.to(device)
            with torch.autocast(device.type, enabled=amp):
                loss = nn.functional.cross_entropy(model(inputs), labels)
            optimizer.zero_grad()
            grad_scaler.scale(loss).backward()
            grad_scaler.step(optimizer)
            grad_scaler.update()
            batches += 1
        print("batches", batches)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--amp", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2)
    model.to(device=device)
    train_model(model=model, device=device, epochs=1, amp=args.amp)
    train_model(model=model, device=device, epochs=2, amp=args.amp)
    print("weights", round(model.weight.sum().item(), 6))
"""


def test_the_objects_meet_in_the_function_and_the_accelerator_reads_the_callers_value():
    output, findings = migrate_text(SCALED)
    assert output is not None, [f.message for f in findings]
    assert (
        "    args = parser.parse_args()\n"
        "    accelerator = Accelerator(\n"
        '        mixed_precision="fp16" if args.amp and torch.cuda.is_available() else "no",\n'
        "    )\n"
    ) in output
    assert (
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "\n"
        "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
    ) in output
    assert "grad_scaler" not in output and ".backward()" not in output
    assert any("`train_model` now prepares `model`" in f.message for f in findings)


def test_calls_that_pass_different_values_keep_the_refusal():
    source = SCALED.replace("epochs=2, amp=args.amp)", "epochs=2, amp=False)")
    output, findings = migrate_text(source)
    assert output is None
    assert any("its arguments read `amp`" in f.message for f in findings if f.needs_human)


def test_both_calls_run_on_two_processes(tmp_path):
    output, _findings = migrate_text(SCALED)
    script = tmp_path / "scaled.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # 32 samples, batch 8, two processes: 2 batches each epoch, 1 + 2 epochs, printed once
    assert re.findall(r"^batches (\d+)$", out, re.MULTILINE) == ["2", "2", "2"], out
    assert len(re.findall(r"^weights -?[0-9.]+$", out, re.MULTILINE)) == 1, out
