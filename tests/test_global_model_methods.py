"""MIG007 in functions that read the module's prepared model as a global: a `sample()` or
`test_func()` defined beside a module-level training loop and run after it calls the model's
own methods (`init_hidden`, `generate`) on the DDP wrapper, which has none of them. They go
through `accelerator.unwrap_model(model)` there too; a function run before the prepare gets the
plain model back from `unwrap_model` as it is."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

PROGRAM = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def init_state(self):
        return torch.zeros(1, 4)

    def generate(self, steps):
        x = self.init_state()
        for _ in range(steps):
            x = self.fc(x)
        return x


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 4)), batch_size=4)

{helper}

for x, y in loader:
    loss = nn.functional.mse_loss(model(x + model.init_state()), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print({call})
"""

HELPERS = {
    "method call": ("def sample():\n    return model.generate(3)", "sample()"),
    "attribute then call": (
        "def first_state():\n    state = model.init_state()\n    return state.sum()",
        "first_state()",
    ),
}


@pytest.mark.parametrize("case", HELPERS)
def test_a_function_reading_the_global_prepared_model_unwraps_its_own_methods(case):
    helper, call = HELPERS[case]
    output, findings = migrate_text(PROGRAM.format(helper=helper, call=call))
    assert output is not None, (case, [f.message for f in findings])
    body = output.split(helper.splitlines()[0], 1)[1].split("for x, y in loader", 1)[0]
    assert "accelerator.unwrap_model(model)." in body, output
    assert "model.init_state()" not in body.replace("unwrap_model(model).init_state()", "")
    # the training loop's own use is unwrapped as before
    assert "x + accelerator.unwrap_model(model).init_state()" in output


def test_a_function_that_only_runs_the_model_keeps_the_wrapper():
    helper = "def predict(x):\n    return model(x)"
    output, findings = migrate_text(PROGRAM.format(helper=helper, call="predict(torch.ones(1, 4))"))
    assert output is not None, [f.message for f in findings]
    assert "    return model(x)\n" in output


DRIVER = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.boxes = 2
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


def train_one_epoch(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean() * model.boxes
        loss.backward()
        optimizer.step()


def {helper}({parameter}, loader):
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += (((({parameter}(x) - y) ** 2).mean()) * {parameter}.boxes).item()
    return total


def run_training():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_one_epoch(model, train_loader, optimizer)
        print({helper}({argument}, loader=val_loader))


train_loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
val_loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
print({helper}(Net(), val_loader))
run_training()
"""


@pytest.mark.parametrize(
    ("helper", "parameter", "argument"),
    [("evaluate", "model", "model"), ("validate", "net", "model"), ("score", "m", "m=model")],
)
def test_a_function_a_global_reader_hands_the_model_unwraps_its_attributes(
    helper, parameter, argument
):
    """`run_training()` prepares the model and hands it to `evaluate(model, ...)`, which reads
    `model.boxes` and which the module also runs on a plain model (h8 YOLO: `model.B` raised
    AttributeError on the DDP wrapper at the end of the first epoch): the parameter handed the
    prepared model is unwrapped, which gives the plain one back as it is."""
    source = DRIVER.format(helper=helper, parameter=parameter, argument=argument)
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert f"accelerator.unwrap_model({parameter}).boxes).item()" in output
    assert "* accelerator.unwrap_model(model).boxes\n" in output
