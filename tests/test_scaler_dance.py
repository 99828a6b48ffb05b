"""MIG020 on the GradScaler's less common moves (the reviewed goldens are
fixtures/golden/amp_scaler_*): where an `unscale_` goes, and a `load_state_dict` it cannot
turn into a statement of its own."""

from __future__ import annotations

from migrator.engine import migrate_text

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cuda.amp.GradScaler()
{resume}
for x, y in loader:
    x, y = x.to(device), y.to(device)
    optimizer.zero_grad()
    with torch.cuda.amp.autocast():
        loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
{step}
    scaler.step(optimizer)
    scaler.update()
"""


def migrate(step: str, resume: str = "") -> tuple[str | None, list[str]]:
    output, findings = migrate_text(SCRIPT.format(step=step, resume=resume))
    return output, [f.code for f in findings if f.needs_human]


def test_an_unscale_before_a_clip_after_its_enclosing_block_goes():
    """`clip_grad_norm_` unscales on the accelerator; a second unscale would raise."""
    output, _ = migrate(
        "    if True:\n        scaler.unscale_(optimizer)\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"
    )
    assert "unscale" not in output
    assert "accelerator.clip_grad_norm_(model.parameters(), 1.0)" in output


def test_an_unscale_no_clip_follows_stays_as_the_accelerators():
    output, _ = migrate(
        "    scaler.unscale_(optimizer)\n    norm = sum(p.grad.norm() for p in model.parameters())"
    )
    assert "    accelerator.unscale_gradients(optimizer)\n" in output


def test_a_load_state_dict_sharing_its_line_is_left_to_a_human():
    output, codes = migrate("", resume="state = {}; scaler.load_state_dict(state)")
    assert output is None
    assert codes == ["MIG900"]
    output, codes = migrate("", resume="state = {}\nscaler.load_state_dict(state)")
    assert (
        "if accelerator.scaler is not None:\n    accelerator.scaler.load_state_dict(state)\n"
        in output
    )


OFF = """\
import torch
from torch.amp.grad_scaler import GradScaler
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = GradScaler(enabled={enabled})
for x, y in loader:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""


def test_a_scaler_switched_off_goes_with_its_dance_and_asks_for_no_fp16():
    """`GradScaler(enabled=False)` scales nothing: the original trains in fp32, so must the
    migrated script (before, the Accelerator got fp16 on CUDA machines)."""
    output, findings = migrate_text(OFF.format(enabled="False"))
    assert output is not None, [f.message for f in findings]
    assert "accelerator = Accelerator()\n" in output
    assert "mixed_precision" not in output and "GradScaler" not in output
    assert "scaler" not in output
    assert "    accelerator.backward(loss)\n    optimizer.step()\n" in output


def test_a_scaler_switched_on_still_asks_for_fp16_on_cuda():
    output, _ = migrate_text(OFF.format(enabled="True"))
    assert 'mixed_precision="fp16" if torch.cuda.is_available() else "no"' in output
    assert "GradScaler" not in output
