"""Helpers' writes on 2 processes after migration: each file written once, by the main
process (SPEC §3b.2), where the unmigrated helpers would have written from both."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from migrator.engine import migrate_text
from tests.fixtures import ROOT

SCRIPT = """\
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def save_checkpoint(state, folder):
    if not os.path.exists(folder):
        os.makedirs(folder)
    torch.save(state, os.path.join(folder, "last.pt"))


class CsvLogger:
    def __init__(self, path):
        self.path = path

    def log(self, *values):
        with open(self.path, "a") as handle:
            handle.write(",".join(str(v) for v in values) + "\\n")


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(data, batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    logger = CsvLogger("log.csv")
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        logger.log(epoch, "done")
        save_checkpoint({"epoch": epoch, "model": model.state_dict()}, "checkpoints")


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_helpers_write_each_file_once_on_two_processes(tmp_path):
    output, findings = migrate_text(SCRIPT)
    assert output is not None, findings
    (tmp_path / "train.py").write_text(output)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    done = subprocess.run(
        [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "train.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "log.csv").read_text().splitlines() == ["0,done", "1,done", "2,done"]
    import torch

    state = torch.load(tmp_path / "checkpoints" / "last.pt")
    assert state["epoch"] == 2
    assert sorted(state["model"]) == ["bias", "weight"]  # no `module.` prefix
