"""A device written as a string (`device = "cuda" if ... else "cpu"`) becomes
`accelerator.device`, a torch.device, which equals no string: the script's comparisons with a
device type (`if device == "cuda":`, `pin_memory=device == "cuda"`), also in the functions of
the file it is handed to, read `device.type`, so they keep choosing what they chose."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.fixtures import without_batch_note

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


PINNED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

if torch.cuda.is_available():
    device = torch.device({gpu})
else:
    device = torch.device("cpu")
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
model = torch.nn.Linear(2, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_the_first_gpu_chosen_as_the_device_becomes_the_accelerators():
    """`torch.device("cuda:0")` as the script's device is what a one-GPU script means by "the
    GPU": it becomes accelerator.device with no MIG902; another index pins a GPU, reported."""
    for gpu in ('"cuda:0"', '"cuda", 0'):
        output, findings = migrate_text(PINNED.format(gpu=gpu))
        assert without_batch_note(findings) == [], (gpu, findings)
        assert "cuda" not in output and "torch.device" not in output  # the choice went
    output, findings = migrate_text(PINNED.format(gpu='"cuda:1"'))
    assert [f.code for f in findings] == ["MIG902", "MIG950"]  # refused, said to be left
    assert findings[0].message.startswith("explicit device index 'cuda:1'")


def test_a_batch_taken_off_the_device_for_numpy_stays_taken_off():
    """`y.to("cpu").numpy()` moves a value off the device (it would fail on a GPU tensor
    without it): it stays, while the batch's own `.to(device)` goes."""
    source = PINNED.format(gpu='"cuda"').replace(
        "    optimizer.step()\n",
        '    optimizer.step()\n    targets = y.to("cpu").numpy()\n'
        '    shown = loss.detach().to("cpu").tolist()\n',
    )
    output, findings = migrate_text(source)
    assert without_batch_note(findings) == []
    assert '    targets = y.to("cpu").numpy()\n' in output
    assert '    shown = loss.detach().to("cpu").tolist()\n' in output
    assert "x.to(" not in output


METHODS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    @classmethod
    def build(cls, width):
        net = cls()
        return net

    def make_optimizer(self, lr, device_type):
        fused = device_type == "cuda"
        return torch.optim.AdamW(self.parameters(), lr=lr, fused=fused or None)

    def describe(self, device):
        return self._kind(device)

    def _kind(self, where):
        if where != "cpu":
            return "accelerated"
        return "host"

    def forward(self, x):
        return self.layer(x)


device = "cuda" if torch.cuda.is_available() else "cpu"
model = {made}.to(device)
print(model.describe(device))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, foreach=model.make_optimizer(0.1, device_type=device) is None)
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_string_device_handed_to_methods_is_compared_by_type():
    """The device handed to a method of the model (`model.make_optimizer(..., device_type=
    device)`, the model made by its class or by a class method returning `cls()`), and on
    through a sibling method (`self._kind(device)`), is compared by its `.type` there too."""
    for made in ("Net()", "Net.build(4)"):
        output, findings = migrate_text(METHODS.format(made=made))
        assert [f.code for f in findings if f.needs_human] == [], made
        assert '        fused = device_type.type == "cuda"\n' in output, made
        assert '        if where.type != "cpu":\n' in output, made


def test_a_method_also_handed_a_string_is_left_as_written():
    """A second call passes the text "cpu": `device_type.type` would fail there, so the
    method keeps its comparison."""
    script = METHODS.format(made="Net()") + 'other = model.make_optimizer(0.1, "cpu")\n'
    output, _ = migrate_text(script)
    assert '        fused = device_type == "cuda"\n' in output
    assert '        if where.type != "cpu":\n' in output


def test_a_class_method_returning_something_else_is_no_instance():
    """`Net.settings()` returns a dict, not a Net: its `make_optimizer` is not Net's."""
    script = (
        METHODS.replace(
            "    def make_optimizer",
            "    @classmethod\n    def settings(cls):\n        return dict()\n\n"
            "    def make_optimizer",
        )
        .format(made="Net()")
        .replace(
            "foreach=model.make_optimizer(0.1, device_type=device)",
            "foreach=config.make_optimizer(0.1, device_type=device)",
        )
        .replace(
            "print(model.describe(device))",
            "print(model.describe(device))\nconfig = Net.settings()",
        )
    )
    output, _ = migrate_text(script)
    assert '        fused = device_type == "cuda"\n' in output
