"""MIG010 on a DistributedSampler chosen against a single-process one: `if distributed:` with the
sampler in the body and None/RandomSampler/SequentialSampler in the `else:`, the same the other
way round (`if args.local_rank == -1: RandomSampler(...) else: DistributedSampler(...)`, old
HF examples), and both as conditional expressions. Where the single-process sampler matches
the DistributedSampler's shuffle the whole choice becomes the loader's `shuffle=`; where it
does not (an unshuffled fallback against a shuffling DistributedSampler) the program is
refused, since which order the user wants is not known."""

from __future__ import annotations

import pytest

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
