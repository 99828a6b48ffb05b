"""A copy of the model taken before `prepare` (an EMA, a teacher) stays where the original
had put it (h10 review, a DDPM): prepare places only the model, so the placement the copy
follows is kept (`Net().to(device)`, `model.to(device)` with `device` now
`accelerator.device`). Before, MIG003 removed it and the EMA stayed on the CPU, its update
crashing on a GPU. Where the original copied before placing, nothing is placed either way."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

EMA = """\
from copy import deepcopy

import torch
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
@MODEL@
ema_model = @COPY@
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for epoch in range(2):
    for x, y in train:
        x, y = x.to(DEVICE), y.to(DEVICE)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for e, p in zip(ema_model.parameters(), model.parameters()):
                e.mul_(0.99).add_(p, alpha=0.01)
torch.save(ema_model.state_dict(), "ema.pt")
"""


@pytest.mark.parametrize(
    ("model", "kept"),
    [
        ("model = torch.nn.Linear(4, 1).to(DEVICE)", "model = torch.nn.Linear(4, 1).to(DEVICE)"),
        ("model = torch.nn.Linear(4, 1)\nmodel.to(DEVICE)", "model.to(DEVICE)"),
        ("model = torch.nn.Linear(4, 1)\nmodel = model.to(DEVICE)", "model = model.to(DEVICE)"),
    ],
)
@pytest.mark.parametrize("copy", ["deepcopy(model)", "deepcopy(model).eval()"])
def test_a_placement_a_copy_follows_stays(model, kept, copy):
    out, findings = migrate_text(EMA.replace("@MODEL@", model).replace("@COPY@", copy))
    assert out is not None, findings
    assert "DEVICE = accelerator.device" in out
    assert f"{kept}\nema_model = {copy}\n" in out
    assert "model, optimizer, train = accelerator.prepare(model, optimizer, train)" in out


def test_a_copy_taken_before_the_placement_stays_unplaced_as_it_was():
    source = EMA.replace("@MODEL@\nema_model = @COPY@\n", (
        "model = torch.nn.Linear(4, 1)\nema_model = deepcopy(model)\nmodel.to(DEVICE)\n"))  # fmt: skip
    out, findings = migrate_text(source)
    assert out is not None, findings
    assert "model.to(DEVICE)" not in out  # prepare places the model; the copy was on the CPU
    assert "ema_model = deepcopy(model)\n" in out


EMA_CLASS = """\
class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)


def make_ema(net):
    return deepcopy(net)


"""


@pytest.mark.parametrize(
    "copy", ["EMA(model, 0.99).shadow", "make_ema(model)", "EMA(decay=0.9, model=model).shadow"]
)
def test_a_copy_kept_by_a_class_or_function_of_the_file_is_a_copy(copy):
    """An `EMA(model, decay)` of this file whose constructor only deep-copies the model (h12
    review: a DDPM refused with "handed to `EMA()`, which may run it"): set-up that sees the
    plain model, and its placement stays so the copy is where the original's was."""
    source = EMA.replace("@MODEL@", "model = torch.nn.Linear(4, 1).to(DEVICE)").replace(
        "@COPY@", copy
    )
    source = source.replace('DEVICE = "cuda"', EMA_CLASS + 'DEVICE = "cuda"')
    out, findings = migrate_text(source)
    assert out is not None, [f.message for f in findings]
    assert "model = torch.nn.Linear(4, 1).to(DEVICE)" in out
    assert out.index(f"ema_model = {copy}") < out.index("accelerator.prepare(")
