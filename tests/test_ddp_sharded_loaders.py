"""A loader the program shards itself by its rank through anything but a DistributedSampler
(h10 review: a bucketing batch sampler built by a helper handed `rank` and `world_size`) is
left to a human (MIG907): before, MIG010 handed the helper the Accelerator's rank and
MIG006 prepared its loader, sharding it again (1/N² of the data a process). A
DistributedSampler given the rank is still MIG010's to fold into the prepared loader."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

WORKER = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from datamanager import BucketBatchSampler, ShardedSet, get_dataloader


def worker(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    data = TensorDataset(torch.randn(64, 2), torch.randn(64, 1))
@LOADER@
    model = DDP(torch.nn.Linear(2, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
"""


def worker(loader: str) -> str:
    return WORKER.replace("@LOADER@", loader)


@pytest.mark.parametrize(
    ("loader", "handed"),
    [
        ("    loader = get_dataloader(data, 8, wrld_size=world_size, rank=rank)", "`world_size`"),
        ("    loader = get_dataloader(data, 8, world_size, rank)", "`world_size`"),
        (
            (
                "    buckets = BucketBatchSampler(data, 8, rank=dist.get_rank())\n"
                "    loader = DataLoader(data, batch_sampler=buckets)"
            ),
            "`dist.get_rank()`",
        ),
        (
            (
                "    shard = ShardedSet('train.txt', rank, world_size)\n"
                "    loader = DataLoader(shard, batch_size=8, shuffle=True)"
            ),
            "`rank`",
        ),
    ],
)
def test_a_loader_sharded_by_the_programs_own_code_is_left_to_a_human(loader, handed):
    out, findings = migrate_text(worker(loader))
    assert out is None
    refused = [f for f in findings if f.code == "MIG907"]
    assert len(refused) == 1 and handed in refused[0].message, findings
    assert "sharded again" in refused[0].message


@pytest.mark.parametrize(
    "loader",
    [
        (
            "    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank)\n"
            "    loader = DataLoader(data, batch_size=8, sampler=sampler)"
        ),
        "    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data, rank=rank))",
        (
            "    loader = DataLoader(data, batch_size=8, shuffle=True,\n"
            "                        generator=torch.Generator().manual_seed(1 + rank))"
        ),
    ],
)
def test_a_distributed_sampler_or_a_seed_from_the_rank_still_migrates(loader):
    out, findings = migrate_text(worker(loader))
    assert out is not None, findings
    assert "accelerator.prepare(" in out and "DistributedSampler" not in out
    assert not [f for f in findings if f.code == "MIG907"], findings
