"""mp.spawn's function may rebind the parameters that stay parameters of the direct call
(h10 review: `BATCH_SIZE = 2048` after its last use blocked a whole program); only those that
become the Accelerator's values (the rank, the number of processes) must keep them, and the
refusal names the one rebound and its line."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

SPAWNED = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main(rank, world_size, batch_size, path):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    data = TensorDataset(torch.randn(64, 2), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=batch_size, sampler=DistributedSampler(data))
@REBIND@
    model = DDP(torch.nn.Linear(2, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = 2
    mp.spawn(main, args=(world_size, 8, "out"), nprocs=world_size)
"""


@pytest.mark.parametrize(
    "rebind", ["    batch_size = 2048", "    path = os.path.join(path, 'run')", "    path += '/x'"]
)
def test_a_parameter_that_stays_a_parameter_may_be_rebound(rebind):
    out, findings = migrate_text(SPAWNED.replace("@REBIND@", rebind))
    assert out is not None, findings
    assert "def main(batch_size, path):" in out
    assert 'main(8, "out")' in out
    assert rebind.strip() in out


@pytest.mark.parametrize(
    ("rebind", "name"),
    [
        ("    world_size = 3", "world_size"),
        ("    rank = rank % 2", "rank"),
        ("    rank += 1", "rank"),
    ],
)
def test_rebinding_the_rank_or_the_count_still_refuses_naming_it(rebind, name):
    out, findings = migrate_text(SPAWNED.replace("@REBIND@", rebind))
    assert out is None
    refused = [f for f in findings if f.code == "MIG907"]
    assert len(refused) == 1, findings
    assert f"rebinds `{name}` (line 16)" in refused[0].message
