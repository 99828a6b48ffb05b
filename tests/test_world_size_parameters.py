"""A DistributedSampler in a helper told the helper's parameters (`num_replicas=world_size,
rank=rank`) is told the world size and the rank where every caller passes them so: read from
the launch environment, from the process group, or handed on again (h10 review: a program
refused because its helper received `int(os.environ["WORLD_SIZE"])` from its caller). A
caller passing anything else still refuses."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

PROGRAM = """\
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def get_loaders(batch_size, world_size, rank):
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True)
    return DataLoader(data, batch_size=batch_size, sampler=sampler)


@BUILD@
def main():
@BIND@
    loader = @CALL@
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

FROM_ENVIRONMENT = """\
    world_size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    dist.init_process_group(backend="gloo")"""
FROM_THE_GROUP = """\
    dist.init_process_group(backend="gloo")
    world_size = dist.get_world_size()
    rank = dist.get_rank()"""


@pytest.mark.parametrize("bind", [FROM_ENVIRONMENT, FROM_THE_GROUP])
@pytest.mark.parametrize(
    "call",
    [
        "get_loaders(8, world_size=world_size, rank=rank)",
        "get_loaders(8, world_size, rank)",
        "build(world_size, rank)",  # handed on again
    ],
)
def test_a_helper_told_the_callers_world_size_and_rank_migrates(bind, call):
    build = "def build(world_size, rank):\n    return get_loaders(8, world_size, rank)\n\n\n"
    source = PROGRAM.replace("@BUILD@\n", build if call.startswith("build") else "")
    out, findings = migrate_text(source.replace("@BIND@", bind).replace("@CALL@", call))
    assert out is not None, findings
    assert "DistributedSampler" not in out
    assert "return DataLoader(data, batch_size=batch_size, shuffle=True)" in out


def test_a_caller_passing_another_count_still_refuses():
    call = "get_loaders(8, world_size=2, rank=rank)"
    source = PROGRAM.replace("@BUILD@\n", "").replace("@BIND@", FROM_ENVIRONMENT)
    out, findings = migrate_text(source.replace("@CALL@", call))
    assert out is None
    assert any(f.code == "MIG907" and "num_replicas" in f.message for f in findings), findings
