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


AUGMENTED = """\
import random

import torch
from torch.utils.data import DataLoader, Dataset


class Flip:
    def __init__(self, p):
        self.p = p

    def __call__(self, x):
        if random.random() < self.p:
            return x.flip(0)
        return x


class Rows(Dataset):
    def __init__(self):
        self.rows = torch.arange(64.0).view(16, 4)
        self.flip = Flip(0.5)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.flip(self.rows[i]), torch.ones(1)


loader = DataLoader(Rows(), batch_size=4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def train_epoch():
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        {leave}


for epoch in range(2):
    train_epoch()
"""


def test_a_per_sample_draw_that_returns_early_leaves_no_process_behind():
    """`if random.random() < p: return x.flip(0)` in a transform: each process decides alone,
    and nothing that syncs follows in the function it returns from."""
    assert not _decides_per_process(AUGMENTED.format(leave="pass"))


def test_leaving_a_loop_or_a_function_that_syncs_on_a_draw_is_refused():
    stop = "if random.random() < 0.1:\n            {leave}"
    assert _decides_per_process(AUGMENTED.format(leave=stop.format(leave="break")))
    assert _decides_per_process(AUGMENTED.format(leave=stop.format(leave="return")))


MIXED_BATCHES = """\
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    if np.random.rand(1) < 0.5:
        lam = np.random.beta(1.0, 1.0)
        output = model(x.flip(0) * (1 - lam) + x * lam)
    else:
        {other}
    loss = torch.nn.functional.mse_loss(output, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_branches_that_run_the_same_collectives_keep_the_processes_in_step():
    """CutMix's per-process draw picks a branch, and either branch runs one forward of the
    prepared model: the processes stay in step. A forward in one branch only does not."""
    assert not _decides_per_process(MIXED_BATCHES.format(other="output = model(x)"))
    assert _decides_per_process(MIXED_BATCHES.format(other="output = torch.zeros(4, 1)"))


NONE_TESTED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.arange(64.0).view(16, 4), torch.ones(16, 1)), batch_size=4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
probe = torch.randn(8, 4)
best = None
for epoch in range(20):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        score = model(probe).pow(2).mean().item()
    {test}
"""


def test_a_none_test_of_a_name_bound_to_numbers_decides_alike():
    """`best is None` comes out alike on every process where `best` is bound to None and
    otherwise to numbers, whatever the numbers: only the comparison of them is refused."""
    alike = NONE_TESTED.format(test="if best is None:\n        best = score\n    print(epoch)")
    assert not _decides_per_process(alike)
    unlike = NONE_TESTED.format(
        test="if best is None:\n        best = score\n    elif score > best:\n        break"
    )
    output, findings = migrate_text(unlike)
    assert output is None
    decided = [f.message for f in findings if "decides on this process's value" in f.message]
    assert decided and all("is None" not in m for m in decided), decided
    maybe_none = NONE_TESTED.format(
        test="best = score if score > 1 else None\n    if best is None:\n        break"
    )
    assert _decides_per_process(maybe_none)


KEYED = """\
import collections

import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.arange(64.0).view(16, 4), torch.ones(16, 1)), batch_size=4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
history = {history}
for epoch in range(20):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    score = model(torch.randn(8, 4)).pow(2).mean().item()
    key = "train_score"
    if key in history:
        history[key].append(score)
    else:
        history[key] = [score]
    {check}
"""


def test_a_key_test_of_a_dict_filled_with_per_process_values_decides_alike():
    """`key in history` comes out alike on every process where `history` is a dict every
    process fills under the same keys: only the key decides, not the values kept."""
    for history in ('{"train_score": []}', "dict()", "collections.defaultdict(list)"):
        source = KEYED.format(history=history, check="if len(loader) > 99:\n        break")
        assert not _decides_per_process(source), history
    listed = KEYED.format(history="[]", check="if score in history:\n        break")
    assert _decides_per_process(listed.replace("history[key] = [score]", "history.append(score)"))


INDEXED = """\
import torch

data = torch.arange(1000.0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def get_batch():
    ix = torch.randint(0, 990, (4,))
    x = torch.stack([data[i : i + 8] for i in ix])
    return x, x.sum(1, keepdim=True)


best = float("inf")
for step in range(100):
    x, y = get_batch()
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        {check}
"""


def test_rows_taken_at_this_processes_own_random_indices_are_its_own():
    """`data[i : i + 8]` for `i` of an unseeded `torch.randint`: each process's own rows, and
    the losses on them (h11 review: a nanoGPT-style `get_batch` estimate printed with no
    note)."""
    out, findings = migrate_text(INDEXED.format(check="print(loss.item())"))
    assert out is not None, findings
    assert 'accelerator.reduce(loss.detach(), "mean")' in out  # the printed loss: reduced
    assert _decides_per_process(INDEXED.format(check="if loss.item() < 0.1:\n            break"))
    seeded = INDEXED.replace("import torch\n", "import torch\n\ntorch.manual_seed(0)\n", 1)
    assert not _decides_per_process(seeded.format(check="if loss.item() < 0.1:\n            break"))
