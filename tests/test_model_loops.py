"""Several models trained in turn over one loader (`for width in widths: model = ...;
optimizer = ...; train`): the loader is prepared once, before the loop; each model and its
optimizer are prepared in the pass that makes them. Preparing the loader in every pass would
hand an already-prepared loader to prepare again (HF Accelerate would shard it twice)."""

from __future__ import annotations

import re

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

MODELS = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8)
    for width in [3, 5]:
        model = nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = 0
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            batches += 1
        print("width", width, "batches", batches)


main()
"""


def test_the_loader_is_prepared_before_the_loop_and_each_model_in_its_pass():
    output, findings = migrate_text(MODELS)
    assert output is not None, [f.message for f in findings]
    assert (
        "    loader = DataLoader(data, batch_size=8)\n"
        "    loader = accelerator.prepare(loader)\n"
        "    for width in [3, 5]:\n"
    ) in output
    assert (
        "        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "\n"
        "        model, optimizer = accelerator.prepare(model, optimizer)\n"
    ) in output
    assert output.count("accelerator.prepare(") == 2


def test_the_models_train_in_turn_on_two_processes(tmp_path):
    output, _findings = migrate_text(MODELS)
    script = tmp_path / "models.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # 32 samples, batch 8, two processes: 2 batches each, per model, printed once
    assert re.findall(r"^width (\d) batches (\d)$", out, re.MULTILINE) == [
        ("3", "2"),
        ("5", "2"),
    ], out
