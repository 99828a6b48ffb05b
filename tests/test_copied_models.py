"""`ema = deepcopy(model)` before the rest of the training objects exist (DiT: the EMA copy is
made before the DDP wrap and the optimizer) copies the plain model, as the original did, so
prepare may come after it - where the copy is as placed as the original's: moved itself
(`deepcopy(model).to(device)`), or made before the original moved the model anywhere."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch_each_writing

SCRIPT = """\
from copy import deepcopy

import torch
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
ema = deepcopy(model).to(device)
ema.requires_grad_(False)
model = model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 2)), batch_size=4)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(0.5).add_(p, alpha=0.5)
print("ema", round(sum(p.sum().item() for p in ema.parameters()), 6))
"""


def test_a_placed_copy_made_before_the_optimizer_lets_prepare_follow_the_optimizer():
    output, findings = migrate_text(SCRIPT)
    assert output is not None, [f.message for f in findings]
    assert "device = accelerator.device\n" in output
    assert "ema = deepcopy(model).to(device)\n" in output
    assert (
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 2)), batch_size=4)\n"
        "\nmodel, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
    ) in output


def test_a_copy_made_after_the_model_was_moved_still_needs_a_human():
    source = SCRIPT.replace(
        "ema = deepcopy(model).to(device)\nema.requires_grad_(False)\nmodel = model.to(device)\n",
        "model = model.to(device)\nema = deepcopy(model)\nema.requires_grad_(False)\n",
    )
    output, findings = migrate_text(source)
    assert output is None
    messages = [f.message for f in findings if f.code == "MIG900"]
    assert any("handed to `copy.deepcopy()`" in m for m in messages), messages


def test_the_copy_follows_the_synchronised_model_on_two_processes(tmp_path):
    printed = launch_each_writing(migrate_text(SCRIPT)[0], '"ema"', tmp_path)
    assert printed[0] == printed[1], printed
