"""MIG032 on losses handed to trackers under a main-process guard (`if
accelerator.is_main_process: wandb.log({"loss": loss.item()})`, `writer.add_scalar(...)`,
`mlflow.log_metric(...)`): the guard would log process 0's share of the batch, so the loss is
reduced right before the guard, where every process reaches it, and the guarded calls read the
mean (the whole batch's loss, what the original logged). A guard that not every process
reaches alike, or a call whose test is this process's own, is left as it was."""

from __future__ import annotations

import re
import subprocess
import sys

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

LOGGED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
{imports}
torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64,))), batch_size=8)
model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr={lr})
{tracker}
step = 0
for epoch in range(2):
    for x, y in loader:
        {name} = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        {name}.backward()
        optimizer.step()
        if step % 2 == 0:
            {log}
        step += 1
"""

SPELLINGS = [  # imports, the tracker made before the loop, the logging call
    ("import wandb\n", 'wandb.init(project="p")', 'wandb.log({{"train/loss": {name}.item()}})'),
    (
        "from torch.utils.tensorboard import SummaryWriter\n",
        'writer = SummaryWriter("runs")',
        'writer.add_scalar("loss", {name}.item(), step)',
    ),
    ("import mlflow\n", "", 'mlflow.log_metric("loss", {name}.item(), step=step)'),
]


def _migrate(source: str) -> str:
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    return output


def test_a_tracked_loss_is_reduced_before_the_main_process_guard():
    for imports, tracker, log in SPELLINGS:
        for name in ("loss", "train_loss"):
            source = LOGGED.format(
                imports=imports, tracker=tracker, lr="0.1", name=name, log=log.format(name=name)
            )
            output = _migrate(source)
            reduced = (
                "        if step % 2 == 0:\n"
                f'            {name}_mean = accelerator.reduce({name}.detach(), "mean")\n'
                "            if accelerator.is_main_process:\n"
            )
            assert reduced in output, output
            assert f"{name}_mean.item()" in output
            assert f"{name}.item()" not in output  # the guarded call reads the mean
            assert f"accelerator.backward({name})" in output  # the loss itself is left


def test_the_mean_takes_a_name_the_module_does_not_use():
    imports, tracker, log = SPELLINGS[0]
    source = LOGGED.format(imports=imports, tracker=tracker, lr="0.1", name="loss",
                           log=log.format(name="loss"))  # fmt: skip
    source = source.replace("step = 0\n", "step = 0\nloss_mean = 0.0\n")
    output = _migrate(source)
    assert 'loss_mean_2 = accelerator.reduce(loss.detach(), "mean")\n' in output
    assert '"train/loss": loss_mean_2.item()' in output


def test_two_calls_in_one_guard_share_one_reduction():
    source = LOGGED.format(
        imports="import mlflow\nimport wandb\n",
        tracker="",
        lr="0.1",
        name="loss",
        log='wandb.log({"loss": loss.item()})\n            mlflow.log_metric("loss", loss.item())',
    )
    output = _migrate(source)
    assert output.count("accelerator.reduce(loss.detach()") == 1
    assert output.count("loss_mean.item()") == 2


def test_a_log_whose_test_is_this_processs_own_is_left():
    """`if loss.item() > 1.0:` differs per process: a reduction before the guard, inside that
    `if`, would wait forever for the processes that did not enter it."""
    imports, tracker, log = SPELLINGS[0]
    source = LOGGED.format(imports=imports, tracker=tracker, lr="0.1", name="loss",
                           log=log.format(name="loss"))  # fmt: skip
    source = source.replace("if step % 2 == 0:", "if loss.item() > 1.0:")
    output, _ = migrate_text(source)
    assert output is None or "accelerator.reduce(loss" not in output


REPORTED = """\
import torch
import torch.distributed as dist
import wandb
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def report(loss):
    wandb.log({{"loss": loss.item()}})


dist.init_process_group("gloo")
rank = dist.get_rank()
data = TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64,)))
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
model = DDP(torch.nn.Linear(4, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if rank == 0:
    wandb.init(project="p")
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    {call}
"""


def test_a_log_in_a_function_the_main_process_alone_calls_is_left():
    """`if rank == 0: report(loss)`: `report` runs on the main process only, and a reduction
    in it would wait for processes that never call it."""
    output = _migrate(REPORTED.format(call="if rank == 0:\n        report(loss)"))
    assert "    if accelerator.is_main_process:\n        report(loss)\n" in output
    assert "accelerator.reduce(loss" not in output


def test_a_log_in_a_function_every_process_calls_is_reduced_there():
    """`report(loss)` on every process: its guarded log is reduced inside it, before its
    guard, where every process arrives."""
    output = _migrate(REPORTED.format(call="report(loss)"))
    assert (
        "def report(loss):\n"
        '    loss_mean = accelerator.reduce(loss.detach(), "mean")\n'
        "    if accelerator.is_main_process:\n"
        '        wandb.log({"loss": loss_mean.item()})\n'
    ) in output


STAND_IN = """\
import json
import os


def log_metric(key, value, step=None):
    with open(f"logged{os.environ.get('RANK', '0')}.jsonl", "a") as out:
        out.write(json.dumps([key, value, step]) + "\\n")
"""


def _logged(path) -> list[float]:
    return [float(re.findall(r", ([-\d.e]+), ", line)[0]) for line in path.read_text().splitlines()]


def test_two_processes_with_split_batches_log_the_one_process_losses(tmp_path, monkeypatch):
    """lr=0: the model never changes; with split batches each process has half of each batch
    of 8, and the mean of the halves' losses is the batch's: the logged series is the
    1-process run's, logged once."""
    (tmp_path / "mlflow.py").write_text(STAND_IN)
    source = LOGGED.format(imports="import mlflow\n", tracker="", lr="0.0", name="loss",
                           log='mlflow.log_metric("loss", loss.item(), step=step)')  # fmt: skip
    (tmp_path / "original.py").write_text(source)
    subprocess.run([sys.executable, "original.py"], cwd=tmp_path, timeout=120, check=True)
    expected = _logged(tmp_path / "logged0.jsonl")
    assert len(expected) == 8  # 8 batches an epoch, two epochs, every second step
    (tmp_path / "logged0.jsonl").unlink()
    (tmp_path / "migrated.py").write_text(_migrate(source))
    monkeypatch.setenv("MIGRATE_SPLIT_BATCHES", "1")
    launch(tmp_path / "migrated.py", tmp_path)
    assert not (tmp_path / "logged1.jsonl").exists()
    logged = _logged(tmp_path / "logged0.jsonl")
    assert len(logged) == len(expected)
    assert all(abs(a - b) < 1e-5 for a, b in zip(logged, expected, strict=True)), (logged, expected)
