"""`shuffle = train_sampler is None`, then `DataLoader(..., shuffle=shuffle,
sampler=train_sampler)`: the inline `shuffle=(sampler is None)` idiom through a name (h10
review, a medical image classifier refused over it). The name goes with the sampler and the
loader shuffles as the sampler did; a name read for anything else still refuses."""

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


def main():
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    train_sampler = DistributedSampler(data@SHUFFLE@) if distributed else None
    @NAMED@
    loader = DataLoader(data, batch_size=8, shuffle=shuffle, sampler=train_sampler)
    model = torch.nn.Linear(4, 1)
    if distributed:
        model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        if distributed:
            train_sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    ("named", "shuffle", "expected"),
    [
        ("shuffle = train_sampler is None", "", "shuffle=True"),
        ("shuffle = (train_sampler is None)", "", "shuffle=True"),
        ("shuffle = not train_sampler", ", shuffle=False", "shuffle=False"),
    ],
)
def test_a_shuffle_named_after_the_sampler_goes_with_it(named, shuffle, expected):
    out, findings = migrate_text(PROGRAM.replace("@NAMED@", named).replace("@SHUFFLE@", shuffle))
    assert out is not None, findings
    assert "train_sampler" not in out and "DistributedSampler" not in out
    assert f"loader = DataLoader(data, batch_size=8, {expected})\n" in out
    assert "shuffle = " not in out


def test_a_shuffle_name_read_elsewhere_still_refuses():
    named = "shuffle = train_sampler is None\n    print(shuffle)"
    out, findings = migrate_text(PROGRAM.replace("@NAMED@", named).replace("@SHUFFLE@", ""))
    assert out is None
    assert any(f.code == "MIG907" and "train_sampler" in f.message for f in findings), findings
