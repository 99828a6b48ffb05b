"""MIG002: a device held as a string (`"cuda" if ... else "cpu"`) becomes `accelerator.device`,
a `torch.device`; the script's string comparisons of it compare `device.type`, or cudnn
benchmarking is silently never switched on (and `"cuda" in device` would raise)."""

from __future__ import annotations

from migrator.engine import migrate_text

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Linear(4, 1).to(device)
if device == "cuda":
    torch.backends.cudnn.benchmark = True
pin = "cuda" in device
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)


def describe(device):
    return "gpu" if device == "cuda" else "cpu"


for epoch in range(2):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(describe("cpu"), device != "cpu")
"""


def test_string_comparisons_of_the_device_compare_its_type():
    output, _ = migrate_text(SCRIPT)
    assert output is not None
    assert "device = accelerator.device\n" in output
    assert '\nif device.type == "cuda":\n    torch.backends.cudnn.benchmark = True\n' in output
    assert 'pin = "cuda" in device.type\n' in output
    assert 'device.type != "cpu")' in output


def test_a_function_with_its_own_device_parameter_is_left_alone():
    output, _ = migrate_text(SCRIPT)
    assert '    return "gpu" if device == "cuda" else "cpu"\n' in output


def test_a_torch_device_compared_with_a_string_is_not_ours():
    text = SCRIPT.replace(
        'device = "cuda" if torch.cuda.is_available() else "cpu"',
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
    )
    output, _ = migrate_text(text)
    assert output is not None
    assert '\nif device == "cuda":\n' in output
