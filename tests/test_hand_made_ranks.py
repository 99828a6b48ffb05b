"""Hand-written world size and rank that only feed native DDP set-up (issue 27, review of
2026-11-27 rule 4): a world size spelled as the expression mp.spawn was started with
(`len(args.gpus.split(","))`) is the number of processes, and a rank or world size the
script computes itself (SageMaker's host list, SLURM's variables) that only feeds
`init_process_group`, the launch environment, a DistributedSampler or a set-up helper goes
with them; a note says the program now starts under a launcher. What still refuses: a
computed rank that anything else reads. Golden fixtures: fixtures/golden/ddp_spawn_world_size
_expression, ddp_hosts_rank, ddp_slurm_rank; here the other spellings and the fixtures on 2
processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrator.engine import migrate_text
from tests.golden_runs import launch_in_turn

SPAWNED = """\
import argparse
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def worker(rank, cfg):
    setup(rank, @COUNT@)
    data = TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
    loader = DataLoader(data, batch_size=cfg.batch // @COUNT@, sampler=DistributedSampler(data))
    model = DDP(torch.nn.Linear(2, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    cfg = argparse.Namespace(gpus="0,1", devices=[0, 1], batch=8)
    mp.spawn(worker, args=(cfg,), nprocs=@SPAWNED@)
"""


@pytest.mark.parametrize(
    ("count", "spawned"),
    [
        ("len(cfg.gpus.split(','))", 'len(cfg.gpus.split(","))'),  # quotes differ: one tree
        ("len(cfg.devices)", "len(cfg.devices)"),
        ("torch.cuda.device_count()", "torch.cuda.device_count()"),
    ],
)
def test_the_spawned_count_is_the_number_of_processes(count, spawned):
    output, findings = migrate_text(SPAWNED.replace("@COUNT@", count).replace("@SPAWNED@", spawned))
    assert output is not None, [f.message for f in findings]
    assert "batch_size=cfg.batch // accelerator.num_processes" in output
    assert "def worker(cfg):" in output and "setup(" not in output


def test_another_count_than_the_spawned_one_still_refuses():
    output, findings = migrate_text(
        SPAWNED.replace("@COUNT@", "len(cfg.devices) * 2").replace("@SPAWNED@", "len(cfg.devices)")
    )
    assert output is None
    assert [f.code for f in findings if f.level == "warning"] == ["MIG907"]


HOSTS = """\
import json
import os
import sys
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

data = TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
loader = DataLoader(data, batch_size=4)
model = torch.nn.Linear(2, 1)
@SETUP@
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
SETUPS = {
    "sagemaker_environment": """\
hosts = json.loads(os.environ["SM_HOSTS"])
rank = hosts.index(os.environ["SM_CURRENT_HOST"])
world_size = len(hosts)
os.environ["RANK"] = str(rank)
os.environ["WORLD_SIZE"] = str(world_size)
dist.init_process_group("gloo", rank=rank, world_size=world_size)
model = torch.nn.parallel.DistributedDataParallel(model)""",
    "slurm_with_sampler": """\
rank = int(os.environ["SLURM_PROCID"])
world_size = int(os.getenv("SLURM_NTASKS", "1"))
dist.init_process_group("gloo", init_method="env://", world_size=world_size, rank=rank)
sampler = DistributedSampler(data, num_replicas=world_size, rank=rank)
loader = DataLoader(data, batch_size=4, sampler=sampler)
model = torch.nn.parallel.DistributedDataParallel(model)""",
    "mpi_rank_by_keyword": """\
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
dist.init_process_group(backend="gloo", world_size=size, rank=rank)
model = torch.nn.parallel.DistributedDataParallel(model)""",
}


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_a_rank_that_only_feeds_the_set_up_goes_with_it(setup):
    output, findings = migrate_text(HOSTS.replace("@SETUP@", SETUPS[setup]))
    assert output is not None, [f.message for f in findings]
    assert "init_process_group" not in output and "DistributedDataParallel" not in output
    assert "rank" not in output.split("accelerator = Accelerator()")[1].replace("_rank", "")
    notes = [
        f
        for f in findings
        if f.code == "MIG010" and f.level == "note" and "set_epoch" not in f.message
    ]  # (the epoch note: no set_epoch here)
    assert len(notes) == 1 and "migrate launch --nproc N" in notes[0].message


def test_a_computed_rank_read_elsewhere_still_refuses():
    setup = SETUPS["sagemaker_environment"] + '\nprint(f"host {rank} of {world_size}")'
    output, findings = migrate_text(HOSTS.replace("@SETUP@", setup))
    assert output is None
    assert any(f.code == "MIG907" and "computed by hand" in f.message for f in findings)


SLURM_WORKER = """\
import os
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


def train(rank, world_size, epochs=2):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    loader = DataLoader(TensorDataset(torch.randn(16, 2), torch.randn(16, 1)), batch_size=4)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    rank = int(os.environ["SLURM_PROCID"])
    world_size = int(os.environ["SLURM_NTASKS"])
    train(rank, world_size, epochs=3)
"""


def test_a_worker_handed_slurm_variables_gets_the_launch_note():
    output, findings = migrate_text(SLURM_WORKER)
    assert output is not None, [f.message for f in findings]
    notes = [
        f
        for f in findings
        if f.code == "MIG010" and f.level == "note" and "set_epoch" not in f.message
    ]  # (the epoch note: no set_epoch here)
    assert len(notes) == 1 and "SLURM_PROCID" in notes[0].message
    assert "train(epochs=3)" in output and "SLURM" not in output


# -- the golden fixtures on 2 processes ------------------------------------------------------

FIXTURES = ["ddp_spawn_world_size_expression", "ddp_hosts_rank", "ddp_slurm_rank"]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    return launch_in_turn(tmp_path_factory.mktemp("ranks"), FIXTURES)


@pytest.mark.slow
def test_the_spawned_script_runs_one_process_per_device(launched):
    out = launched["ddp_spawn_world_size_expression"]
    # `batch_size // accelerator.num_processes`: 8 a process, 16 a step as in the original
    assert "process 0 of 2" in out and "process 1 of 2" not in out  # the main process prints
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("epoch")] == [
        "epoch 0",
        "epoch 1",
    ]


@pytest.mark.slow
def test_the_host_and_slurm_scripts_train_under_the_launcher(launched):
    for name in FIXTURES[1:]:
        lines = [line for line in launched[name].splitlines() if line.startswith("epoch ")]
        assert len(lines) >= 2, launched[name]
    losses = [float(line.split()[-1]) for line in launched["ddp_hosts_rank"].splitlines()
              if line.startswith("epoch ")]  # fmt: skip
    assert losses[-1] < losses[0]


SCHEDULED = """\
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main(args):
    rank = {rank}
    local_rank = {local}
    args.world_size = {size}
    dist.init_process_group("nccl", rank=rank, world_size=args.world_size)
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64,)))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    model = DDP(torch.nn.Linear(4, 3).to(device), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if rank == 0:
        print(f"done on {{local_rank}} of {{args.world_size}}")
    dist.destroy_process_group()
"""
SCHEDULERS = {  # the scheduler's variables for the rank, the local rank and the world size
    "srun": ('int(os.environ["SLURM_PROCID"])', 'int(os.environ["SLURM_LOCALID"])',
             'int(os.environ["SLURM_NTASKS"])'),
    "mpirun": ('int(os.getenv("OMPI_COMM_WORLD_RANK", 0))',
               'int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))',
               'int(os.environ["OMPI_COMM_WORLD_SIZE"])'),
}  # fmt: skip


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_a_schedulers_ranks_are_the_launchers(scheduler):
    """srun's and mpirun's variables say what torchrun's say: the rank, the local rank (the
    GPU the script pins) and the world size become the accelerator's, none of them is left
    reading a variable the launcher does not set, and the note says how the program starts."""
    rank, local, size = SCHEDULERS[scheduler]
    output, findings = migrate_text(SCHEDULED.format(rank=rank, local=local, size=size))
    assert output is not None, [f.message for f in findings]
    assert "os.environ" not in output and "os.getenv" not in output
    assert "    local_rank = accelerator.local_process_index\n" in output
    assert "set_device" not in output and "torch.device(" not in output
    assert "    if accelerator.is_main_process:\n" in output
    assert "{local_rank} of {accelerator.num_processes}" in output
    notes = [
        f
        for f in findings
        if f.code == "MIG010" and f.level == "note" and "set_epoch" not in f.message
    ]  # (the epoch note: no set_epoch here)
    assert len(notes) == 1 and "migrate launch --nproc N" in notes[0].message


RENDEZVOUS = """\
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = os.environ.get("MASTER_ADDR", "localhost")
    os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "12355")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    {shown}


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    setup(rank, world_size)
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    loader = DataLoader(data, batch_size=4, sampler=DistributedSampler(data))
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def test_a_rendezvous_address_the_program_still_reads_keeps_its_default(tmp_path):
    """The set-up's `os.environ["MASTER_ADDR"] = ...` goes with it, unless the program reads
    `os.environ["MASTER_ADDR"]` after: then the default stays, and one plain process runs."""
    shown = "print(f\"rendezvous at {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}\")"
    output, findings = migrate_text(RENDEZVOUS.format(shown=shown))
    assert output is not None, [f.message for f in findings]
    assert '    os.environ["MASTER_ADDR"] = os.environ.get("MASTER_ADDR", "localhost")\n' in output
    assert "init_process_group" not in output
    script = tmp_path / "migrated.py"
    script.write_text(output)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK",
                                                            "WORLD_SIZE", "LOCAL_RANK")}  # fmt: skip
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rendezvous at localhost:12355" in done.stdout
    unread, _ = migrate_text(RENDEZVOUS.format(shown="pass"))
    assert "MASTER_ADDR" not in unread


def test_a_process_group_without_a_ddp_wrap_says_the_processes_now_train_one_model():
    """Each process of the original stepped a copy of its own (a process group and a
    DistributedSampler, no DistributedDataParallel); prepared, the model is wrapped and the
    copies become one: a note says so. With the wrap, no such note."""
    unwrapped = SCHEDULED.format(**dict(zip(("rank", "local", "size"), SCHEDULERS["srun"])))
    unwrapped = unwrapped.replace(
        "model = DDP(torch.nn.Linear(4, 3).to(device), device_ids=[local_rank])",
        "model = torch.nn.Linear(4, 3).to(device)",
    )
    output, findings = migrate_text(unwrapped)
    assert output is not None, [f.message for f in findings]
    notes = [f.message for f in findings if "never wraps its model" in f.message]
    assert len(notes) == 1 and "train one model on their averaged gradients" in notes[0]
    _output, wrapped = migrate_text(
        SCHEDULED.format(**dict(zip(("rank", "local", "size"), SCHEDULERS["srun"])))
    )
    assert not [f for f in wrapped if "never wraps its model" in f.message]
