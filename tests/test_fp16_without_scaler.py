"""MIG020: float16 autocast with no GradScaler in the program (h12 review: a WGAN trained
under fp16 autocast alone). Accelerate's `mixed_precision="fp16"` adds loss scaling, which
skips the steps whose scaled gradients overflow - another training. The original's autocast
stays as it is, the Accelerator gets no `mixed_precision=`, and a note says why; with a
GradScaler, or in bfloat16 (no scaler needed), the autocast becomes the Accelerator's."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

TRAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
{scaler}for x, y in loader:
    x, y = x.cuda(), y.cuda()
    with {autocast}:
        loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
{step}
"""
PLAIN_STEP = "    loss.backward()\n    optimizer.step()"
SCALED_STEP = "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()"
FP16 = [
    'torch.autocast("cuda", dtype=torch.float16)',
    "torch.cuda.amp.autocast()",
    'torch.amp.autocast(device_type="cuda", dtype=torch.float16)',
]


@pytest.mark.parametrize("autocast", FP16)
def test_fp16_autocast_without_a_scaler_stays_as_it_is(autocast):
    output, findings = migrate_text(TRAIN.format(scaler="", autocast=autocast, step=PLAIN_STEP))
    assert output is not None, [f.message for f in findings]
    assert f"    with {autocast}:\n" in output
    assert "mixed_precision" not in output and "accelerator.autocast" not in output
    [note] = [f for f in findings if f.code == "MIG020"]
    assert not note.needs_human and "no GradScaler" in note.message
    assert "accelerator.backward(loss)" in output


@pytest.mark.parametrize("autocast", FP16)
def test_fp16_autocast_with_a_scaler_is_the_accelerator_s(autocast):
    scaler = "scaler = torch.cuda.amp.GradScaler()\n"
    output, findings = migrate_text(
        TRAIN.format(scaler=scaler, autocast=autocast, step=SCALED_STEP)
    )
    assert output is not None, [f.message for f in findings]
    assert "with accelerator.autocast():" in output
    assert 'mixed_precision="fp16"' in output
    assert not [f for f in findings if "no GradScaler" in f.message]


def test_bf16_autocast_needs_no_scaler():
    autocast = 'torch.autocast("cuda", dtype=torch.bfloat16)'
    output, findings = migrate_text(TRAIN.format(scaler="", autocast=autocast, step=PLAIN_STEP))
    assert output is not None, [f.message for f in findings]
    assert "with accelerator.autocast():" in output and 'mixed_precision="bf16"' in output
