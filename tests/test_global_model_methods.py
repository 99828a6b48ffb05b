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
