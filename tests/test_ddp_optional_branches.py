"""Programs whose DDP is optional (nanoGPT's shape, h9 review): `ddp = RANK is set`, then
`if ddp:` sets up the process group and reads the world size and rank, `else:` has one
process (`world_size = 1`, `rank = 0`); the DistributedSampler is told those names, and the
model lives under two names (`raw_model = model.module if ddp else model`).

- The sampler is told the world size and the rank on both paths: it goes (MIG010), where a
  name bound to 1 in a branch that does not set up the process group (a choice to read all
  the data) still refuses.
- Prepare rebinds the name the training forward runs: `model` when the optimizer is built on
  `raw_model.parameters()` and the loop calls `model(x)` (before, prepare rebound `raw_model`
  and the loop trained the plain module, its gradients never averaged); `raw_model` when the
  loop itself runs `raw_model(x)`, with a note that the original's processes trained apart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrator.engine import migrate_text

ROOT = Path(__file__).resolve().parents[1]

OPTIONAL = """\
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ddp = int(os.environ.get("RANK", -1)) != -1
@BRANCHES@
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
if ddp:
    model = DDP(model)
raw_model = @ALIAS@
dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
loader = DataLoader(dataset, batch_size=8, sampler=sampler)
optimizer = torch.optim.SGD(raw_model.parameters(), lr=0.1)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(@FORWARD@(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("weights", rank, [round(v, 6) for v in raw_model.weight.flatten().tolist()])
if ddp:
    dist.destroy_process_group()
"""

FROM_ENVIRONMENT = """\
if ddp:
    dist.init_process_group(backend="gloo")
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
else:
    rank = 0
    world_size = 1"""

FROM_THE_GROUP = """\
if ddp:
    dist.init_process_group("gloo")
    world_size = dist.get_world_size()
    rank = dist.get_rank()
else:
    world_size = 1
    rank = 0"""

ONE_PROCESS_FIRST = """\
if not ddp:
    world_size, rank = 1, 0
    world_size = 1
    rank = 0
else:
    dist.init_process_group("gloo")
    world_size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])"""


def program(branches: str, alias: str = "model.module if ddp else model", forward: str = "model"):
    return (
        OPTIONAL.replace("@BRANCHES@", branches)
        .replace("@ALIAS@", alias)
        .replace("@FORWARD@", forward)
    )


@pytest.mark.parametrize("branches", [FROM_ENVIRONMENT, FROM_THE_GROUP])
def test_a_sampler_told_the_world_size_on_both_paths_goes(branches):
    out, findings = migrate_text(program(branches))
    assert "DistributedSampler" not in out and "set_epoch" not in out
    assert "loader = DataLoader(dataset, batch_size=8, shuffle=True)" in out
    assert not [f for f in findings if f.level != "note"], findings
    # the name the loop runs is the one prepare rebinds
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in out
    assert "MIG010" not in {f.code for f in findings if "trained `" in f.message}


def test_the_two_names_of_one_branch_each():
    """`world_size, rank = 1, 0` then rebinding both: three bindings, not the branch pair."""
    _, findings = migrate_text(program(ONE_PROCESS_FIRST))
    assert any(f.code == "MIG907" and "num_replicas" in f.message for f in findings), findings


@pytest.mark.parametrize(
    ("one", "why"),
    [
        ("world_size = 2", "two processes claimed where the group was never set up"),
        ("world_size = len(os.listdir('.'))", "anything else"),
    ],
)
def test_another_value_on_the_one_process_path_still_refuses(one, why):
    branches = FROM_ENVIRONMENT.replace("world_size = 1", one)
    _, findings = migrate_text(program(branches))
    assert any(f.code == "MIG907" and "num_replicas" in f.message for f in findings), why


def test_one_process_chosen_where_the_group_is_set_up_anyway_still_refuses():
    """`world_size = 1` on a path that still runs with a process group (a choice to read all
    the data on every process): the Accelerator would shard it."""
    branches = """\
dist.init_process_group("gloo")
rank = dist.get_rank()
if os.environ.get("FULL_DATA"):
    world_size = 1
else:
    world_size = dist.get_world_size()"""
    _, findings = migrate_text(program(branches))
    assert any(f.code == "MIG907" and "num_replicas" in f.message for f in findings), findings


@pytest.mark.parametrize("alias", ["model.module if ddp else model", "model"])
def test_the_optimizer_on_the_alias_and_the_loop_on_the_wrapper_prepares_the_wrapper(alias):
    out, findings = migrate_text(program(FROM_ENVIRONMENT, alias=alias))
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in out
    assert "raw_model, optimizer" not in out
    assert not any("trained `" in f.message for f in findings)


def test_a_loop_that_runs_the_module_inside_the_wrapper_is_said():
    out, findings = migrate_text(program(FROM_ENVIRONMENT, forward="raw_model"))
    assert "raw_model, optimizer, loader = accelerator.prepare(raw_model, optimizer, loader)" in out
    notes = [f for f in findings if f.code == "MIG010" and "trained `raw_model`" in f.message]
    assert len(notes) == 1 and notes[0].level == "note", findings
    assert "each process trained a copy of its own" in notes[0].message
    assert "(line 19)" in notes[0].message  # the DDP wrap


def _launch(tmp_path: Path, source: str, nproc: int) -> list[float]:
    script = tmp_path / "train.py"
    script.write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", str(nproc), str(script)]
    if nproc == 1:
        command = [sys.executable, str(script)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("weights")]
    assert len(lines) == 1, done.stdout  # the main process prints
    return [float(v) for v in lines[0].split("[")[1].rstrip("]").split(",")]


@pytest.mark.slow
@pytest.mark.parametrize("forward", ["model", "raw_model"])
def test_the_migrated_processes_train_one_model(tmp_path, forward):
    """On 2 processes the weights are those of one process training on all the data (split
    batches: 8 samples a step either way): the gradients were averaged. Unaveraged, each
    process would step on its own 4 samples."""
    out, _ = migrate_text(program(FROM_ENVIRONMENT, forward=forward))
    assert "accelerator = Accelerator()" in out
    out = out.replace("Accelerator()", "Accelerator(split_batches=True)")
    two = _launch(tmp_path, out, 2)
    alone = _launch(tmp_path, out, 1)
    assert max(abs(a - b) for a, b in zip(two, alone)) < 1e-4, (two, alone)
