"""MIG009 on data ordered or picked at random once, while it is set up (`np.random.permutation`,
`random.shuffle` in a Dataset's `__init__`, `df.sample(frac=1)`, `torch.randperm`): from an
RNG nothing seeds each process would hold its data in another order and the index-sharded
loader would give some samples to two processes and none to others. Such a draw gets an RNG
of its own with seed 0, the same on every process; draws per sample, per epoch or in a
seeded program are left."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

PROGRAM = """\
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __init__(self, values):
        self.values = list(values)
{init_draw}

    def __len__(self):
        return len(self.values)

    def __getitem__(self, i):
        x = torch.tensor([float(self.values[i])])
        if random.random() < 0.0:
            x = -x
        return x, x


{seed}
values = list(range(40))
{module_draw}
data = Items(values)
loader = DataLoader(data, batch_size=4)
model = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
seen = []
for epoch in range(1):
    order = torch.randperm(4)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += x.flatten().tolist()
"""


def _migrate(init_draw: str = "", module_draw: str = "", seed: str = "") -> tuple[str, list]:
    source = PROGRAM.format(
        init_draw=init_draw or "        pass", module_draw=module_draw, seed=seed
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    # (the loop's own draws get torch offset per process: test_unseeded_randomness.py)
    return output, [f for f in findings if f.code == "MIG009" and "starting seed" not in f.message]


@pytest.mark.parametrize(
    ("module_draw", "drawn"),
    [
        ("values = list(np.random.permutation(values))", "np.random.RandomState(0).permutation("),
        ("np.random.shuffle(values)", "np.random.RandomState(0).shuffle(values)"),
        ("random.shuffle(values)", "random.Random(0).shuffle(values)"),
        ("values = random.sample(values, 40)", "random.Random(0).sample(values, 40)"),
        (
            "values = torch.randperm(40).tolist()",
            "torch.randperm(40, generator=torch.Generator().manual_seed(0))",
        ),
    ],
)
def test_a_draw_while_the_data_is_set_up_gets_its_own_seeded_rng(module_draw, drawn):
    output, notes = _migrate(module_draw=module_draw)
    assert drawn in output
    assert len(notes) == 1 and "while the data is set up" in notes[0].message


def test_a_shuffle_in_a_datasets_init_is_seeded_and_per_sample_randomness_is_left():
    output, notes = _migrate(init_draw="        random.shuffle(self.values)")
    assert "        random.Random(0).shuffle(self.values)\n" in output
    assert "if random.random() < 0.0:" in output  # `__getitem__`: per sample
    assert "order = torch.randperm(4)\n" in output  # per epoch
    assert len(notes) == 1


def test_a_data_frame_sample_gets_a_random_state():
    module_draw = "import pandas as pd\nvalues = pd.Series(values).sample(frac=1).tolist()"
    output, notes = _migrate(module_draw=module_draw)
    assert ".sample(frac=1, random_state=0)" in output and len(notes) == 1


@pytest.mark.parametrize(
    ("seed", "module_draw"),
    [
        ("np.random.seed(1)", "np.random.shuffle(values)"),
        ("random.seed(1)", "random.shuffle(values)"),
        ("torch.manual_seed(1)", "values = torch.randperm(40).tolist()"),
    ],
)
def test_a_draw_from_a_seeded_rng_is_left(seed, module_draw):
    output, notes = _migrate(module_draw=module_draw, seed=seed)
    assert module_draw in output
    # the one note left is the seed's own (process_seeds.py: the loop draws per epoch)
    assert not [n for n in notes if "while the data is set up" in n.message]


def test_a_draw_in_a_function_called_per_epoch_is_left():
    source = (
        PROGRAM.format(init_draw="        pass", module_draw="", seed="").replace(
            "    order = torch.randperm(4)\n", "    order = reorder(values)\n"
        )
        + "\n\ndef reorder(values):\n    random.shuffle(values)\n    return values\n"
    )
    output, findings = migrate_text(source)
    assert output is not None
    assert "    random.shuffle(values)\n" in output
    assert not any(f.code == "MIG009" for f in findings)


def test_two_processes_shard_one_order_and_see_every_sample_once(tmp_path):
    output, _ = _migrate(init_draw="        random.shuffle(self.values)")
    each = 'open(f"seen{accelerator.process_index}.txt", "w").write(str(sorted(seen)))\n'
    (tmp_path / "migrated.py").write_text(output + each)
    launch(tmp_path / "migrated.py", tmp_path)
    seen = [eval((tmp_path / f"seen{rank}.txt").read_text()) for rank in range(2)]
    assert sorted(seen[0] + seen[1]) == [float(v) for v in range(40)]


@pytest.mark.parametrize(
    "seed",
    [
        "np.random.seed(random.randint(1, 100))",
        "random_seed = random.randint(1, 100)\nnp.random.seed(random_seed)",
        "import time\nnp.random.seed(int(time.time()))",
    ],
)
def test_a_seed_drawn_at_random_seeds_each_process_apart(seed):
    """A seed that is itself a draw (or the clock) differs per process: the set-up draw still
    gets its own RNG seeded 0."""
    output, notes = _migrate(module_draw="np.random.shuffle(values)", seed=seed)
    assert "np.random.RandomState(0).shuffle(values)" in output
    assert [n for n in notes if "while the data is set up" in n.message]


def test_a_scikit_learn_resample_gets_a_random_state():
    module_draw = "from sklearn.utils import resample\nvalues = resample(values, n_samples=40)"
    output, notes = _migrate(module_draw=module_draw)
    assert "resample(values, n_samples=40, random_state=0)" in output and len(notes) == 1
