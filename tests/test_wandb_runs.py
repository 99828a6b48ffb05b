"""A wandb run whose state the program reads (`config = wandb.config`, `run.name`) is started
on every process, disabled on all but the main one (`mode=None if ... else "disabled"`): the
state reads alike everywhere, and only the main process logs. Guarding `wandb.init` alone
left `wandb.config` unset on the other processes, and reading it raised (h11 review, a
2-process crash). Runs whose state nothing reads are guarded as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrator.engine import migrate_text

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """\
import torch
import wandb
from torch.utils.data import DataLoader, TensorDataset

@INIT@
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=@LR@)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    wandb.log({"epoch": epoch})
wandb.finish()
"""

FLAG = 'PartialState().is_main_process else "disabled"'


@pytest.mark.parametrize(
    ("init", "lr", "expected"),
    [
        (
            'wandb.init(project="p", config={"lr": 0.1})',
            "wandb.config.lr",
            f'wandb.init(project="p", config={{"lr": 0.1}}, mode=None if {FLAG})',
        ),
        (
            'wandb.init(project="p", config={"lr": 0.1}, mode="online")\nconfig = wandb.config',
            "config.lr",
            f'wandb.init(project="p", config={{"lr": 0.1}}, mode="online" if {FLAG})',
        ),
        (
            'run = wandb.init(project="p", mode=args_mode)\nprint(run.name)',
            "0.1",
            f'run = wandb.init(project="p", mode=args_mode if {FLAG})',
        ),
        (
            'run = wandb.init(project="p", mode=pick() or "online")\nprint(run.name)',
            "0.1",
            f'run = wandb.init(project="p", mode=(pick() or "online") if {FLAG})',
        ),
    ],
)
def test_a_run_whose_state_is_read_starts_everywhere_disabled_off_main(init, lr, expected):
    out, findings = migrate_text(PROGRAM.replace("@INIT@", init).replace("@LR@", lr))
    assert out is not None, findings
    assert expected in out, out
    assert "if accelerator.is_main_process:\n        wandb.log(" in out


def test_a_run_whose_state_nothing_reads_is_started_on_the_main_process():
    out, findings = migrate_text(PROGRAM.replace("@INIT@", 'wandb.init(project="p")').replace(
        "@LR@", "0.1"))  # fmt: skip
    assert out is not None, findings
    assert 'if accelerator.is_main_process:\n    wandb.init(project="p")' in out, out
    assert "disabled" not in out


STUB = """\
import os

mode_seen = []


class _Unset:
    def __getattr__(self, key):
        raise RuntimeError(f"You must call wandb.init() before wandb.config.{key}")


class _Config(dict):
    __getattr__ = dict.__getitem__


config = _Unset()


def init(project=None, config=None, mode=None):
    globals()["config"] = _Config(config or {})
    mode_seen.append(mode)


def log(values):
    if mode_seen[-1] != "disabled":
        with open(f"log-{os.getpid()}.txt", "a") as out:
            out.write(f"{values}\\n")


def finish():
    pass
"""


@pytest.mark.slow
def test_the_migrated_run_reads_its_config_on_two_processes_and_logs_once(tmp_path):
    source = PROGRAM.replace("@INIT@", 'wandb.init(project="p", config={"lr": 0.1})')
    out, findings = migrate_text(source.replace("@LR@", "wandb.config.lr"))
    assert out is not None, findings
    (tmp_path / "wandb.py").write_text(STUB)
    (tmp_path / "train.py").write_text(out)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "train.py"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    logs = list(tmp_path.glob("log-*.txt"))
    assert len(logs) == 1 and logs[0].read_text().count("epoch") == 2
