"""`ema = deepcopy(model)` before the rest of the training objects exist (DiT: the EMA copy is
made before the DDP wrap and the optimizer) copies the plain model, as the original did, so
prepare may come after it - where the copy is as placed as the original's: moved itself
(`deepcopy(model).to(device)`), or made before the original moved the model anywhere."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch, launch_each_writing

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


def test_a_copy_made_after_the_model_was_moved_keeps_the_placement():
    """The copy follows the model's placement, which therefore stays (on the accelerator's
    device now): the copy is where the original's was (h10 review: removed, an EMA stayed on
    the CPU). Before, this needed a human."""
    source = SCRIPT.replace(
        "ema = deepcopy(model).to(device)\nema.requires_grad_(False)\nmodel = model.to(device)\n",
        "model = model.to(device)\nema = deepcopy(model)\nema.requires_grad_(False)\n",
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert "device = accelerator.device\n" in output
    assert "model = model.to(device)\nema = deepcopy(model)\n" in output
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n" in output


def test_the_copy_follows_the_synchronised_model_on_two_processes(tmp_path):
    printed = launch_each_writing(migrate_text(SCRIPT)[0], '"ema"', tmp_path)
    assert printed[0] == printed[1], printed


BEST_COPY = """\
import copy
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset
{imports}

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
best = None
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    best = {copied}
sys.stdout.write(f"keys {{sorted(best.state_dict())}}\\n")
"""

COPIES = {
    "deepcopy imported": ("from copy import deepcopy", "deepcopy(model)", "deepcopy"),
    "copy.deepcopy": ("", "copy.deepcopy(model)", "copy.deepcopy"),
    "aliased": ("from copy import deepcopy as clone", "clone(model)", "clone"),
}


@pytest.mark.parametrize("spelling", COPIES, ids=list(COPIES))
def test_a_copy_of_the_prepared_model_copies_the_model_not_its_wrapper(spelling):
    """`best = deepcopy(model)` after prepare (h8 Electric-Load): the copied DDP wrapper saved
    `module.` keys that the model class could not load."""
    imports, copied, call = COPIES[spelling]
    output, findings = migrate_text(BEST_COPY.format(imports=imports, copied=copied))
    assert output is not None, findings
    assert f"    best = {call}(accelerator.unwrap_model(model))\n" in output


def test_a_copy_of_the_state_dict_reads_the_unwrapped_keys():
    output, _ = migrate_text(
        BEST_COPY.format(imports="", copied="copy.deepcopy(model.state_dict())").replace(
            "best.state_dict()", "best"
        )
    )
    assert "copy.deepcopy(accelerator.unwrap_model(model).state_dict())" in output


@pytest.mark.slow
def test_the_best_copy_keeps_the_model_keys_on_two_processes(tmp_path):
    output, _ = migrate_text(BEST_COPY.format(imports="", copied="copy.deepcopy(model)"))
    script = tmp_path / "best.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    assert out.count("keys ['bias', 'weight']") == 2, out
