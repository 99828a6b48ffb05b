"""The value flow's random draws (analysis/effects/value_expressions.py): torch, NumPy and
Python draw from global RNGs that torch seeds per process at start-up unless the program seeds
them with one value. A decision on a value drawn that way differs between processes (each
would take its own branch and wait for the others in the next collective), so it is refused
(MIG953); seeded alike, or drawn from a generator of the program's own, it is the same on
every process and the program migrates."""

from __future__ import annotations

from migrator.engine import migrate_text

PROBED = """\
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset
{seed}
loader = DataLoader(TensorDataset(torch.arange(64.0).view(16, 4), torch.ones(16, 1)), batch_size=4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
probe = {draw}
best = float("inf")
for epoch in range(20):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        score = model(probe).pow(2).mean().item()
    if score > best:
        break
    best = score
"""
DRAWS = {
    "torch": "torch.randn(8, 4)",
    "numpy": "torch.from_numpy(np.random.rand(8, 4)).float()",
    "python": "torch.tensor([[random.random() for _ in range(4)] for _ in range(8)])",
}


def _decides_per_process(source: str) -> bool:
    output, findings = migrate_text(source)
    refused = [
        f for f in findings if f.code == "MIG953" and "decides on this process's value" in f.message
    ]
    assert (output is None) is bool(refused), [f.message for f in findings]
    return bool(refused)


def test_a_decision_on_an_unseeded_draw_is_refused():
    for library, draw in DRAWS.items():
        assert _decides_per_process(PROBED.format(seed="", draw=draw)), library


def test_draws_seeded_alike_or_from_an_own_generator_decide_alike():
    seeds = {
        "torch": "torch.manual_seed(0)",
        "numpy": "np.random.seed(0)",
        "python": "random.seed(0)",
    }
    for library, draw in DRAWS.items():
        assert not _decides_per_process(PROBED.format(seed=seeds[library], draw=draw)), library
    own = "torch.randn(8, 4, generator=torch.Generator().manual_seed(1))"
    assert not _decides_per_process(PROBED.format(seed="", draw=own))


def test_a_seed_makes_only_its_own_rng_alike():
    """`np.random.seed(0)` leaves torch's RNG seeded per process; `set_seed` seeds them all."""
    torch_draw = DRAWS["torch"]
    assert _decides_per_process(PROBED.format(seed="np.random.seed(0)", draw=torch_draw))
    every = "from transformers import set_seed\nset_seed(0)"
    assert not _decides_per_process(PROBED.format(seed=every, draw=torch_draw))
