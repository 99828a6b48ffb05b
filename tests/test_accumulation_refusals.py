"""MIG022's refusals say what they looked for and what they found, with lines: gradients
cleared under a condition of their own, a loss not divided by the steps the optimizer waits
for, and steps computed where the Accelerator cannot read them."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

BASE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def train_epoch(model, loader, optimizer, steps):
{set_steps}    for i, (x, y) in enumerate(loader):
{clear}        loss = torch.nn.functional.mse_loss(model(x), y){divide}
        loss.backward()
        if (i + 1) % steps == 0:
            optimizer.step()
{clear_after}

def main():
    loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_epoch(model, loader, optimizer, 2)


main()
"""
OWN_CLEAR = "        if i % steps == 0:\n            optimizer.zero_grad()\n"
AFTER_STEP = "            optimizer.zero_grad()\n"


@pytest.mark.parametrize(
    "parts, message",
    [
        (
            {"set_steps": "", "clear": OWN_CLEAR, "divide": " / steps", "clear_after": ""},
            (
                "gradients are cleared at line 8 under a condition of their own (the `if` at line "
                "7, not the step's at line 11: the start of the accumulation window?); inside "
                "accelerator.accumulate zero_grad runs only on sync steps: clear them right after "
                "the step, then migrate"
            ),
        ),
        (
            {"set_steps": "", "clear": "", "divide": "", "clear_after": AFTER_STEP},
            (
                "the optimizer steps every `steps` batches (the `if` at line 9) but the loss of the "
                "backward at line 8 is not divided by it; accelerator.backward would divide it: "
                "migrate accumulation by hand"
            ),
        ),
        (
            {
                "set_steps": "    steps = len(loader) // 2\n",
                "clear": "",
                "divide": " / steps",
                "clear_after": AFTER_STEP,
            },
            (
                "the optimizer steps every `steps` batches (the `if` at line 10), but `steps`, set "
                "at line 6 in `train_epoch()`, is not a value the code that makes the Accelerator "
                "can read (gradient_accumulation_steps= is fixed when it is made); migrate by hand"
            ),
        ),
    ],
    ids=["cleared-on-its-own", "undivided", "computed-in-the-helper"],
)
def test_the_refusal_names_the_lines_it_found(parts, message):
    source = BASE.format(**parts)
    output, findings = migrate_text(source)
    assert output is None
    assert [(f.code, f.message) for f in findings if f.needs_human] == [("MIG900", message)]
    # the lines named are the ones the source has there
    lines = source.splitlines()
    if "cleared at line 8" in message:
        assert lines[6].strip() == "if i % steps == 0:" and "zero_grad" in lines[7]
    if "at line 9" in message:
        assert lines[8].strip() == "if (i + 1) % steps == 0:" and "backward" in lines[7]
    if "set at line 6" in message:
        assert lines[5].strip() == "steps = len(loader) // 2"
