"""MIG030's waits (`accelerator.wait_for_everyone()` before a read of a file the main process
writes) are never placed where not every process goes: in the `else:` of a main-process or
rank test, the main process would never meet the others at the barrier and they would wait
forever. The program's own hand-off there (polling for the file) is left as it is."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

HEAD = """\
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
model = DistributedDataParallel(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
"""

HAND_OFFS = {
    "else of a rank test": """
if rank == 0:
    torch.save(model.module.state_dict(), "final.pt")
else:
    while not os.path.exists("final.pt"):
        time.sleep(1)
    state = torch.load("final.pt")
""",
    "else of an elif on the rank": """
if os.environ.get("SKIP_SAVE"):
    state = None
elif dist.get_rank() == 0:
    torch.save(model.module.state_dict(), "final.pt")
else:
    while not os.path.exists("final.pt"):
        time.sleep(1)
    state = torch.load("final.pt")
""",
}


@pytest.mark.parametrize("case", HAND_OFFS)
def test_no_wait_where_the_main_process_never_goes(case):
    output, findings = migrate_text(HEAD + HAND_OFFS[case])
    assert output is not None, (case, [f.message for f in findings])
    tail = output.split("optimizer.step()", 1)[1]
    assert "wait_for_everyone" not in tail.split("else:", 1)[1], output


def test_a_read_every_process_makes_still_waits_for_the_write():
    read_by_all = """
if rank == 0:
    torch.save(model.module.state_dict(), "final.pt")
state = torch.load("final.pt")
"""
    output, findings = migrate_text(HEAD + read_by_all)
    assert output is not None, [f.message for f in findings]
    assert 'accelerator.wait_for_everyone()\nstate = torch.load("final.pt")' in output, output
