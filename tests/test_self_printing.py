"""Calls that print by themselves (`df.info()`, torchsummary's and torchinfo's `summary`) run
on the main process only: `accelerator.print(df.info())` would still print the frame's info on
every process, since `info()` prints before `print` sees its None (h11 review)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

PROGRAM = """\
import pandas as pd
import torch
import torchsummary
from torch.utils.data import DataLoader, TensorDataset

frame = pd.DataFrame({"a": [1.0, 2.0]})
model = torch.nn.Linear(4, 1)
@SHOWN@
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    logger.info("loss %s", loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "shown",
    ["print(frame.info())", "frame.info()", "torchsummary.summary(model, (4,))",
     "print(frame.info(verbose=True))"],
)  # fmt: skip
def test_a_call_that_prints_itself_runs_on_the_main_process(shown):
    out, findings = migrate_text(PROGRAM.replace("@SHOWN@", shown))
    assert out is not None, findings
    assert f"if accelerator.is_main_process:\n    {shown}\n" in out, out
    assert "accelerator.print(frame.info" not in out


def test_a_logger_info_and_a_plain_print_are_left_to_their_rules():
    out, findings = migrate_text(PROGRAM.replace("@SHOWN@", "print(frame.head())"))
    assert out is not None, findings
    assert "accelerator.print(frame.head())" in out
    assert "is_main_process:\n        logger.info" not in out
