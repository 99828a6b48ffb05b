"""The note on checkpoint keys (SPEC §3b.8, rules/checkpoint_keys.py): a model the original
wrapped in DistributedDataParallel or nn.DataParallel itself saved the wrapper's state, keys
prefixed with `module.`; migrated, the plain model's state is saved, without it."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

DDP = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    model = torch.nn.Linear(4, 1)
    {before}
    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    if dist.get_rank() == 0:
        torch.save({saved}.state_dict(), "model.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def _notes(source: str) -> list[str]:
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    return [f.message for f in findings if "started with `module.`" in f.message]


def test_the_wrappers_own_state_loses_its_prefix_with_a_note():
    notes = _notes(DDP.format(before="", saved="model"))
    assert len(notes) == 1
    assert notes[0].startswith(
        "`model.state_dict()` now saves the plain model's keys: where the original had wrapped "
        "`model` in DistributedDataParallel (line 14)"
    )


@pytest.mark.parametrize(
    ("before", "saved"),
    [
        ("", "model.module"),  # the plain model's state: no prefix before or after
        ('torch.save(model.state_dict(), "init.pt")', "model.module"),  # before the wrap
    ],
)
def test_states_without_the_prefix_get_no_note(before, saved):
    assert _notes(DDP.format(before=before, saved=saved)) == []


DATA_PARALLEL = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
model = torch.nn.DataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
torch.save(model.state_dict(), "model.pt")
"""


def test_a_data_parallel_wrappers_state_gets_the_note_too():
    output, findings = migrate_text(DATA_PARALLEL)
    assert output is not None
    notes = [f for f in findings if "started with `module.`" in f.message]
    assert [f.code for f in notes] == ["MIG901"]
    assert "wrapped `model` in nn.DataParallel (line 5)" in notes[0].message
