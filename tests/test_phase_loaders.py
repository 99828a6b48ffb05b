"""A loop that trains and validates in one body, switching its loader by phase
(`if phase == "train": dataloader = train_loader` / `else: dataloader = val_loader`), inside
a loop making one model per pass with its optimizer and scheduler chosen by `if`/`elif`
(the shape of the torchvision fine-tuning tutorial's descendants). The loop draws from both
loaders: both are prepared, once, before the loop of models; each pass prepares its model
and optimizer after the `elif` chain that makes the optimizer. A plateau scheduler chosen
in a chain stays unprepared in every branch, so no branch is a use that comes too early,
and the model returned after the loop is the last pass's prepared one."""

from __future__ import annotations

import re

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

SCRIPT = """\
import torch
from torch import nn, optim
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, TensorDataset


def main(kind="plateau"):
    torch.manual_seed(0)
    train_loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))),
                              batch_size=8)
    val_loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))),
                            batch_size=8)
    for width in [3, 5]:
        model = nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 2))
        if kind == "sgd":
            optimizer = optim.SGD(model.parameters(), lr=0.1)
        else:
            optimizer = optim.Adam(model.parameters(), lr=0.01)
        if kind == "step":
            scheduler = lr_scheduler.StepLR(optimizer, step_size=1)
        else:
            scheduler = lr_scheduler.ReduceLROnPlateau(optimizer, patience=1)
        for epoch in range(2):
            for phase in ["train", "val"]:
                if phase == "train":
                    model.train()
                    dataloader = train_loader
                else:
                    model.eval()
                    dataloader = val_loader
                batches = 0
                total = 0.0
                for inputs, labels in dataloader:
                    optimizer.zero_grad()
                    with torch.set_grad_enabled(phase == "train"):
                        loss = nn.functional.cross_entropy(model(inputs), labels)
                        if phase == "train":
                            loss.backward()
                            optimizer.step()
                    batches += 1
                    total += loss.item()
                print("width", width, phase, "batches", batches)
            scheduler.step(total)
    return model


main()
"""


def test_both_phase_loaders_are_prepared_before_the_models_and_each_model_in_its_pass():
    output, findings = migrate_text(SCRIPT)
    assert output is not None, [f.message for f in findings]
    assert (
        "    train_loader = accelerator.prepare(train_loader)\n"
        "    val_loader = accelerator.prepare(val_loader)\n"
        "    for width in [3, 5]:\n"
    ) in output
    assert (
        "            optimizer = optim.Adam(model.parameters(), lr=0.01)\n"
        "\n"
        "        model, optimizer = accelerator.prepare(model, optimizer)\n"
        '        if kind == "step":\n'
    ) in output
    assert output.count("accelerator.prepare(") == 3  # no scheduler, no alias prepared
    assert "dataloader = train_loader\n" in output and "dataloader = val_loader\n" in output
    notes = [f.message for f in findings if f.code == "MIG006"]
    assert any("scheduler `scheduler` is not prepared" in n for n in notes), notes


def test_the_phases_draw_their_shards_on_two_processes(tmp_path):
    output, _findings = migrate_text(SCRIPT)
    script = tmp_path / "phases.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # two processes: 32 training samples are 2 batches of 8 each, 16 validation samples 1
    found = re.findall(r"^width (\d) (\w+) batches (\d)$", out, re.MULTILINE)
    assert found == [
        (w, phase, n)
        for w in "35"
        for _e in range(2)
        for phase, n in [("train", "2"), ("val", "1")]
    ], out
