"""A device written as a string (`device = "cuda" if ... else "cpu"`) becomes
`accelerator.device`, a torch.device, which equals no string: the script's comparisons with a
device type (`if device == "cuda":`, `pin_memory=device == "cuda"`), also in the functions of
the file it is handed to, read `device.type`, so they keep choosing what they chose."""

from __future__ import annotations

from migrator.engine import migrate_text

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = {device}
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2,
                    pin_memory=device == "cuda")
model = torch.nn.Linear(2, 1).to(device)
if device == "cuda":
    torch.backends.cudnn.benchmark = True


def train(model, loader, optimizer, device):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        if "cpu" != device:
            loss = loss * 1.0
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train(model, loader, optimizer, device)
"""


def test_comparisons_of_a_string_device_read_its_type():
    output, findings = migrate_text(
        SCRIPT.format(device='"cuda" if torch.cuda.is_available() else "cpu"')
    )
    assert [f.code for f in findings if f.needs_human] == []
    assert "device = accelerator.device\n" in output
    assert '                    pin_memory=device.type == "cuda")\n' in output
    assert 'if device.type == "cuda":\n' in output
    assert '        if "cpu" != device.type:\n' in output


def test_a_torch_device_compared_with_a_string_is_left_as_written():
    """torch.device("cuda") == "cuda" was already False in the original: not ours to change."""
    output, _ = migrate_text(
        SCRIPT.format(device='torch.device("cuda" if torch.cuda.is_available() else "cpu")')
    )
    assert "device = accelerator.device\n" in output
    assert ".type" not in output
