"""The original clipped gradients its GradScaler had scaled (no `scaler.unscale_` before the
clip): `accelerator.clip_grad_norm_` unscales first, so the same threshold binds the true
gradients — a change of training under fp16, said in a MIG021 note (h10 review, a Tacotron).
Where the original unscales first, the two agree and nothing is said."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

SCALED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = @SCALER@
train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for x, y in train:
    x, y = x.cuda(), y.cuda()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    scaler.scale(loss).backward()
@UNSCALE@    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize("scaler", ["torch.cuda.amp.GradScaler()", "torch.amp.GradScaler('cuda')"])
def test_clipping_scaled_gradients_is_said_to_change(scaler):
    out, findings = migrate_text(SCALED.replace("@SCALER@", scaler).replace("@UNSCALE@", ""))
    assert out is not None and "accelerator.clip_grad_norm_(model.parameters(), 1.0)" in out
    notes = [f for f in findings if f.code == "MIG021"]
    assert len(notes) == 1 and notes[0].level == "note", findings
    assert "scaled norm" in notes[0].message


def test_clipping_after_unscaling_says_nothing():
    source = SCALED.replace("@SCALER@", "torch.cuda.amp.GradScaler()")
    out, findings = migrate_text(source.replace("@UNSCALE@", "    scaler.unscale_(optimizer)\n"))
    assert out is not None
    assert not [f for f in findings if f.code == "MIG021"], findings
