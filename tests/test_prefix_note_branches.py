"""The `module.` prefix note (MIG010) is true only where the original saved the wrapper's
keys: `net.module.state_dict() if distributed else net.state_dict()` never did (h10 review:
a false note on a medical image classifier)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

SAVED = """\
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
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    net = torch.nn.Linear(4, 1)
    if distributed:
        net = DDP(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
@SAVE@


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    "save",
    [
        "    torch.save(net.module.state_dict() if distributed else net.state_dict(), 'm.pt')",
        (
            "    if distributed:\n        state = net.module.state_dict()\n    else:\n"
            "        state = net.state_dict()\n    torch.save(state, 'm.pt')"
        ),
    ],
)
def test_no_prefix_note_where_the_wrapped_branch_saved_the_plain_module(save):
    """`net.state_dict()` runs only where `net` was never wrapped, the other branch saves
    `net.module`'s keys: the original never wrote the `module.` prefix (h10 review: a false
    note)."""
    _, findings = migrate_text(SAVED.replace("@SAVE@", save))
    assert not [f for f in findings if "module." in f.message and f.code == "MIG010"], findings


def test_the_prefix_note_stays_where_the_wrapper_itself_is_saved():
    _, findings = migrate_text(SAVED.replace("@SAVE@", "    torch.save(net.state_dict(), 'm.pt')"))
    assert any(f.code == "MIG010" and "`module.`" in f.message for f in findings), findings
