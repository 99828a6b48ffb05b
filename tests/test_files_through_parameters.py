"""A file written on the main process through a function of this file that takes its path
(`def save_model(name): torch.save(..., name)`) and read on every process through another
(`def load_model(path): torch.load(path)`) is waited for: every process reaches
`wait_for_everyone()` before the reading call (h10 review, a notebook: the other processes
read a half-written checkpoint). The file is the calls' argument, spelt alike or the same
constant."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

PROGRAM = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

MODEL = torch.nn.Linear(4, 1)
OPTIMIZER = torch.optim.SGD(MODEL.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
PATH = "final.pt"


def save_model(name):
    torch.save(MODEL.state_dict(), name)


def load_model(path, strict=True):
    MODEL.load_state_dict(torch.load(path), strict=strict)


for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(MODEL(x), y)
        OPTIMIZER.zero_grad()
        loss.backward()
        OPTIMIZER.step()
@CALLS@
print(MODEL.weight.sum().item())
"""


@pytest.mark.parametrize(
    ("save", "load"),
    [
        ('save_model("final-" + str(2) + ".pkl")', 'load_model("final-" + str(2) + ".pkl")'),
        ("save_model(PATH)", 'load_model("final.pt", strict=False)'),
        ("save_model(name=PATH)", "load_model(path=PATH)"),
    ],
)
def test_a_read_through_a_function_waits_for_the_write_through_another(save, load):
    out, findings = migrate_text(PROGRAM.replace("@CALLS@", f"{save}\n{load}"))
    assert out is not None, findings
    assert f"{save}\naccelerator.wait_for_everyone()\n{load}\n" in out, out


def test_another_file_is_not_waited_for():
    out, findings = migrate_text(
        PROGRAM.replace("@CALLS@", 'save_model("a.pt")\nload_model("b.pt")')
    )
    assert out is not None, findings
    assert "wait_for_everyone" not in out
