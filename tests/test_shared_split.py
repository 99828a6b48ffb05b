"""MIG009 (SPEC §3b.6): a random split every process draws from an RNG nothing seeded would
differ per process once the loaders are sharded; it gets one seed, the same on every process.
Golden fixtures shared_split_* hold the reviewed rewrites (module level, in a helper through the
module path with fractions, scikit-learn); here the splits that already agree are left, and
the migrated split is drawn alike on two processes."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN
from tests.test_idioms_objects import launch

SCRIPT = """\
import torch
{imports}
from torch.utils.data import DataLoader, TensorDataset, random_split

{seed}
data = TensorDataset(torch.randn(40, 3), torch.randn(40, 1))
train_set, val_set = {split}
loader = DataLoader(train_set, batch_size=4, shuffle=True)
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
"""
SPLIT = "random_split(data, [32, 8])"


def _migrate(seed: str = "", split: str = SPLIT, imports: str = "") -> tuple[str, list[str]]:
    output, findings = migrate_text(SCRIPT.format(seed=seed, split=split, imports=imports))
    assert output is not None
    return output, [f.code for f in findings]


def test_an_unseeded_split_gets_one_seed_on_every_process():
    output, codes = _migrate()
    assert "random_split(data, [32, 8], generator=torch.Generator().manual_seed(0))" in output
    assert sorted(codes) == ["MIG006", "MIG009"]  # the split note, and the global batch note


@pytest.mark.parametrize(
    ("seed", "imports"),
    [
        ("torch.manual_seed(0)", ""),
        ("torch.random.manual_seed(7)", ""),
        ("set_seed(42)", "from transformers import set_seed"),
        ("seed_everything(1)", "from lightning import seed_everything"),
        ("utils.set_seed(3)", "import utils"),
    ],
)
def test_a_split_from_a_seeded_rng_is_left(seed, imports):
    output, codes = _migrate(seed=seed, imports=imports)
    assert f"train_set, val_set = {SPLIT}\n" in output
    assert "MIG009" not in codes


@pytest.mark.parametrize(
    "split",
    [
        "random_split(data, [32, 8], generator=torch.Generator().manual_seed(5))",
        "random_split(data, [32, 8], **split_options)",
    ],
)
def test_a_split_with_its_own_generator_is_left(split):
    output, codes = _migrate(seed="split_options = {}", split=split)
    assert f"train_set, val_set = {split}\n" in output
    assert "MIG009" not in codes


def test_a_split_in_a_file_that_shards_nothing_is_left():
    source = (
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset, random_split\n\n"
        "data = TensorDataset(torch.randn(40, 3))\nkept, _ = random_split(data, [32, 8])\n"
        "model = torch.nn.Linear(3, 1)\nwith torch.no_grad():\n"
        "    for (x,) in DataLoader(kept, batch_size=4):\n        print(model(x).sum())\n"
    )
    output, findings = migrate_text(source)
    assert output is None or "random_split(data, [32, 8])\n" in output
    assert "MIG009" not in [f.code for f in findings]


@pytest.mark.slow
def test_the_migrated_split_is_drawn_alike_on_two_processes(tmp_path):
    output = (GOLDEN / "shared_split_module_level.out.py").read_text()
    assert migrate_text((GOLDEN / "shared_split_module_level.in.py").read_text())[0] == output
    each = 'open(f"val{accelerator.process_index}.txt", "w").write(str(sorted(val_set.indices)))\n'
    script = tmp_path / "split.py"
    script.write_text(output + each)
    launch(script, tmp_path)
    drawn = [(tmp_path / f"val{rank}.txt").read_text() for rank in range(2)]
    assert drawn[0] == drawn[1] and len(eval(drawn[0])) == 8


SEEDED_LATER = """\
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset, random_split


def set_seed(value):
    random.seed(value)
    np.random.seed(value)
    torch.manual_seed(value)


def make_loaders():
    data = TensorDataset(torch.randn(40, 4), torch.randn(40, 1))
    train_set, val_set = random_split(data, [30, 10])
    return DataLoader(train_set, batch_size=5, shuffle=True), DataLoader(val_set, batch_size=5)


def main():
    {first}
    {second}
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in train_loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


main()
"""
LOADERS = "train_loader, val_loader = make_loaders()"


@pytest.mark.parametrize("seed", ["set_seed(42)", "torch.manual_seed(42)"])
def test_a_seed_set_after_the_split_does_not_make_it_alike(seed):
    """`set_seed(42)` in `main()` after the loaders (and their split) are made (h8
    name_classifier): each process drew its own split; the seed comes too late."""
    output, findings = migrate_text(SEEDED_LATER.format(first=LOADERS, second=seed))
    assert output is not None, [f.message for f in findings]
    assert "random_split(data, [30, 10], generator=torch.Generator().manual_seed(0))" in output
    seeded, _ = migrate_text(SEEDED_LATER.format(first=seed, second=LOADERS))
    assert "random_split(data, [30, 10])\n" in seeded
