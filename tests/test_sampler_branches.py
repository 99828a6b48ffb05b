"""MIG010 on a DistributedSampler chosen against a single-process one: `if distributed:` with the
sampler in the body and None/RandomSampler/SequentialSampler in the `else:`, the same the other
way round (`if args.local_rank == -1: RandomSampler(...) else: DistributedSampler(...)`, old
HF examples), and both as conditional expressions. Where the single-process sampler matches
the DistributedSampler's shuffle the whole choice becomes the loader's `shuffle=`; where it
does not (an unshuffled fallback against a shuffling DistributedSampler) the program is
refused, since which order the user wants is not known."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.test_mig010 import codes, migrate

PROGRAM = """\
import argparse

import torch
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    if args.local_rank != -1:
        torch.distributed.init_process_group(backend="gloo")
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
{choice}
    loader = DataLoader(data, sampler=train_sampler, batch_size=8)
    model = torch.nn.Linear(4, 1)
    if args.local_rank != -1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
"""

SHUFFLED = [
    # the DistributedSampler in the `else:` (the test says "not distributed")
    (
        "    if args.local_rank == -1:\n        train_sampler = RandomSampler(data)\n"
        "    else:\n        train_sampler = DistributedSampler(data)"
    ),
    (
        "    if args.local_rank == -1:\n        train_sampler = None\n"
        "    else:\n        train_sampler = DistributedSampler(data)"
    ),
    # in the body, as before
    (
        "    if args.local_rank != -1:\n        train_sampler = DistributedSampler(data)\n"
        "    else:\n        train_sampler = RandomSampler(data)"
    ),
    # conditional expressions, either way round
    "    train_sampler = RandomSampler(data) if args.local_rank == -1 else DistributedSampler(data)",
    "    train_sampler = DistributedSampler(data) if args.local_rank != -1 else RandomSampler(data)",
    "    train_sampler = None if args.local_rank == -1 else DistributedSampler(data)",
]


@pytest.mark.parametrize("choice", SHUFFLED)
def test_a_sampler_choice_that_shuffles_either_way_becomes_the_loaders_shuffle(choice):
    output, findings = migrate(PROGRAM.format(choice=choice))
    assert output is not None, [f.message for f in findings]
    assert "    loader = DataLoader(data, shuffle=True, batch_size=8)\n" in output
    assert "DistributedSampler" not in output and "RandomSampler(" not in output
    assert "init_process_group" not in output and "DistributedDataParallel" not in output
    assert "MIG907" not in codes(findings)


UNSHUFFLED_FALLBACK = [
    (
        "    if args.local_rank == -1:\n        train_sampler = SequentialSampler(data)\n"
        "    else:\n        train_sampler = DistributedSampler(data)"
    ),
    (
        "    train_sampler = SequentialSampler(data) if args.local_rank == -1 "
        "else DistributedSampler(data)"
    ),
]


@pytest.mark.parametrize("choice", UNSHUFFLED_FALLBACK)
def test_a_fallback_in_another_order_than_the_distributed_sampler_is_refused(choice):
    output, findings = migrate(PROGRAM.format(choice=choice))
    assert output is None
    assert "MIG907" in codes(findings)


def test_an_unshuffled_choice_either_way_keeps_the_order():
    choice = (
        "    if args.local_rank == -1:\n        train_sampler = SequentialSampler(data)\n"
        "    else:\n        train_sampler = DistributedSampler(data, shuffle=False)"
    )
    output, findings = migrate(PROGRAM.format(choice=choice))
    assert output is not None, [f.message for f in findings]
    assert "    loader = DataLoader(data, shuffle=False, batch_size=8)\n" in output


INLINE = """\
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, TensorDataset

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    dist.init_process_group("gloo")
ds = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
loader = DataLoader(ds, batch_size=8, sampler={sampler}{shuffle})
model = torch.nn.Linear(4, 1)
if ddp:
    model = DDP(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    {set_epoch}for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("sampler", "shuffle"),
    [
        ("DistributedSampler(ds, shuffle=True) if ddp else None", ", shuffle=not ddp"),
        ("None if not ddp else DistributedSampler(ds)", ", shuffle=not ddp"),
        ("DistributedSampler(ds) if ddp else RandomSampler(ds)", ""),
    ],
)
def test_a_sampler_chosen_in_the_loader_call_goes_like_a_named_one(sampler, shuffle):
    """`DataLoader(ds, sampler=DistributedSampler(ds) if ddp else None, shuffle=not ddp)`
    (h8 English-Hindi translation): the same choice as the named `sampler = ... if ddp else
    None`, which MIG010 migrates; the loader shuffles, and is prepared."""
    source = INLINE.format(sampler=sampler, shuffle=shuffle, set_epoch="")
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert "loader = DataLoader(ds, batch_size=8, shuffle=True)\n" in output
    assert "DistributedSampler" not in output
    notes = [f.message for f in findings if f.code == "MIG010"]
    assert len(notes) == 1 and "never told the epoch (`set_epoch`)" in notes[0]


def test_a_sampler_told_the_epoch_gets_no_epoch_note():
    source = INLINE.format(
        sampler="DistributedSampler(ds) if ddp else None",
        shuffle=", shuffle=not ddp",
        set_epoch="if ddp:\n        loader.sampler.set_epoch(epoch)\n    ",
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert not [f for f in findings if "set_epoch" in f.message]
