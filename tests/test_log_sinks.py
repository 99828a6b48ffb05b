"""Log files opened on every process (h10 review): loguru's `logger.add(path)` at import,
`logging.basicConfig(handlers=[logging.FileHandler(path), ...])`, a name bound to a
FileHandler handed to `addHandler`. Each opens a file every process appends to; MIG030 opens
it on the main process only. A sink that is a stream or a function is no file."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

TRAINING = """\
import logging
import sys

import torch
from loguru import logger
from torch.utils.data import DataLoader, TensorDataset

@SINK@
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for epoch in range(2):
    for x, y in train:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    "sink",
    [
        'logger.add("logs/process_log.log")',
        'logger.add(f"logs/{sys.argv[0]}.log", rotation="10 MB")',
        "logging.basicConfig(level=logging.INFO, handlers=[logging.FileHandler('t.log')])",
    ],
)
def test_a_log_file_is_opened_on_the_main_process_only(sink):
    out, findings = migrate_text(TRAINING.replace("@SINK@", sink))
    assert out is not None, findings
    call = sink.splitlines()[-1].split("(")[0]  # the level MIG030 may rewrite: not compared
    assert f"if accelerator.is_main_process:\n    {call}(" in out, out


@pytest.mark.parametrize(
    "sink",
    [
        "handler = logging.FileHandler('t.log')\nlogging.getLogger().addHandler(handler)",
        (
            "handlers = [logging.StreamHandler(), logging.FileHandler('t.log')]\n"
            "logging.basicConfig(handlers=handlers)"
        ),
    ],
)
def test_a_file_handler_made_apart_from_its_logger_is_left_to_a_human(sink):
    """`handler = logging.FileHandler(path)` opens the file where it is made, on every
    process: a statement MIG030 does not move, so the check refuses it, naming it."""
    out, findings = migrate_text(TRAINING.replace("@SINK@", sink))
    assert out is None
    assert any(f.code == "MIG952" and "FileHandler" in f.message for f in findings), findings


@pytest.mark.parametrize(
    "sink",
    [
        "logger.add(sys.stderr, level='INFO')",
        "logger.add(lambda message: print(message, end=''))",
        "logging.basicConfig(handlers=[logging.StreamHandler()])",
    ],
)
def test_a_stream_or_a_function_is_no_log_file(sink):
    out, _ = migrate_text(TRAINING.replace("@SINK@", sink))
    assert out is not None
    assert f"\n{sink.split('(')[0]}(" in out and "is_main_process" not in out
