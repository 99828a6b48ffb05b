"""A prepared model handed on (small2 survey): a model moved to the CPU for an export and
moved back keeps its move back; a validation helper called with the prepared model unwraps
the model's own methods like the training step does; parameter names looked up by state-dict
keys stay unprefixed."""

from __future__ import annotations

from migrator.engine import migrate_text

STEPS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.linear(x)

    def score(self, out, y):
        return torch.nn.functional.mse_loss(out, y)


def train_step(model, batch, optimizer, device):
    model.train()
    x, y = batch
    x, y = x.to(device), y.to(device)
    loss = model.score(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def val_step(model, batch, device):
    model.eval()
    x, y = batch
    x, y = x.to(device), y.to(device)
    with torch.no_grad():
        return model.score(model(x), y).item()


def fit(model, loader, val_loader, optimizer, epochs, device):
    for epoch in range(epochs):
        for batch in loader:
            train_step(model, batch, optimizer, device)
        for batch in val_loader:
            print(val_step(model, batch, device))
"""


def test_a_helper_called_with_the_prepared_model_unwraps_its_methods():
    output, _ = migrate_text(STEPS)
    assert output is not None
    # the validation loop hands its batches to `val_step()`, which runs the model: an
    # evaluation loop, its loader prepared with the others
    assert (
        "    model, optimizer, loader, val_loader = accelerator.prepare(\n"
        "        model, optimizer, loader, val_loader\n"
        "    )\n"
    ) in output
    assert "    loss = accelerator.unwrap_model(model).score(model(x), y)\n" in output
    assert "        return accelerator.unwrap_model(model).score(model(x), y).item()\n" in output


EXPORT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader, device):
        self.device = device
        self.model = model.to(device)
        self.loader = loader
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def export(self, path):
        original_device = next(self.model.parameters()).device
        self.model.cpu()
        try:
            torch.onnx.export(self.model, torch.randn(1, 4), path)
        finally:
            self.model.to(original_device)

    def train(self, epochs):
        for epoch in range(epochs):
            for x, y in self.loader:
                x, y = x.to(self.device), y.to(self.device)
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            self.export("model.onnx")


data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
Trainer(torch.nn.Linear(4, 1), DataLoader(data, batch_size=4), torch.device("cpu")).train(2)
"""


def test_a_model_moved_to_the_cpu_is_moved_back():
    output, _ = migrate_text(EXPORT)
    assert output is not None
    assert (
        "        self.model.cpu()\n"
        "        try:\n"
        "            if self.accelerator.is_main_process:\n"
        "                torch.onnx.export(self.accelerator.unwrap_model(self.model), "
        "torch.randn(1, 4), path)\n"
        "        finally:\n"
        "            self.model.to(original_device)\n"
    ) in output
    assert "        self.model = model\n" in output  # the placement in __init__ still goes


PROXIMAL = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def train(net, loader, global_tensors, mu, epochs):
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    anchors = {name: t for name, t in zip(net.state_dict().keys(), global_tensors)}
    for epoch in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(net(x), y)
            proximal = 0.0
            for name, p in net.named_parameters():
                if name in anchors:
                    proximal += torch.sum((p - anchors[name]) ** 2)
            loss = loss + mu / 2 * proximal
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


net = torch.nn.Linear(4, 1)
start = [t.clone() for t in net.state_dict().values()]
data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
train(net, DataLoader(data, batch_size=4), start, 0.1, 2)
"""


def test_named_parameters_matched_with_state_dict_keys_are_unwrapped_together():
    output, _ = migrate_text(PROXIMAL)
    assert output is not None
    assert "zip(accelerator.unwrap_model(net).state_dict().keys(), global_tensors)" in output
    assert "            for name, p in accelerator.unwrap_model(net).named_parameters():\n" in (
        output
    )
    assert "optimizer = torch.optim.SGD(net.parameters(), lr=0.1)" in output


def test_named_parameters_alone_are_left_on_the_prepared_model():
    output, _ = migrate_text(PROXIMAL.replace("zip(net.state_dict().keys(), ", "zip(range(2), "))
    assert output is not None
    assert "            for name, p in net.named_parameters():\n" in output


QUANTIZED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
small = @QUANTIZE@(model, {torch.nn.Linear}, dtype=torch.qint8)
print(small(torch.randn(2, 4)))
"""


def test_a_quantized_copy_is_made_of_the_plain_module():
    """`quantize_dynamic(model, ...)` copies the module it is handed: of the prepared one,
    the copy is a DDP wrapper around the quantized net (h11 review)."""
    for quantize in (
        "torch.quantization.quantize_dynamic",
        "torch.ao.quantization.quantize_dynamic",
    ):
        out, findings = migrate_text(QUANTIZED.replace("@QUANTIZE@", quantize))
        assert out is not None, findings
        assert f"{quantize}(accelerator.unwrap_model(model), " in out, out
