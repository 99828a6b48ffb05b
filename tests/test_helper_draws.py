"""Random draws in project helpers the migrated file calls (migrator/program/helper_draws.py):
a validation sample drawn by a helper of another module with an RNG no seed makes alike is
each process's own once launched on N processes, and so are the losses computed from it. An
early stop decided on them differs per process, and the processes that go on wait forever
for those that stopped (h10 review: a data reader's generator drawing with unseeded
`np.random` decided a `break`, and the migrated program hung)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from migrator.engine import Options, migrate_bytes
from migrator.program.helper_draws import helper_draws

READER = """\
import random

import numpy as np
import torch


def sample_batch(size):
    rows = np.random.choice(64, size)
    return torch.arange(256.0).reshape(64, 4)[rows], torch.arange(64.0).reshape(64, 1)[rows]


def batch_of(size):
    return sample_batch(size)


def fixed_batch(size):
    return torch.ones(size, 4), torch.zeros(size, 1)


class Reader:
    def __init__(self, n):
        self.x = torch.linspace(0, 1, n * 4).reshape(n, 4)
        self.y = self.x.sum(1, keepdim=True)

    def batches(self, size):
        order = list(range(len(self.x)))
        random.shuffle(order)
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            yield self.x[rows], self.y[rows]

    def valid(self, size):
        return next(self.batches(size))

    def fixed(self, size):
        return self.x[:size], self.y[:size]


class Splitter:
    def __init__(self, n):
        self.rows = torch.randperm(n)

    def held_out(self):
        return self.rows[:4]
"""

ENTRY = """\
import torch
@IMPORT@

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
@SETUP@
best, waited = None, 0
for epoch in range(20):
    for step in range(8):
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        vx, vy = @VALID@
        val_loss = torch.nn.functional.mse_loss(model(vx), vy).item()
    if best is None or val_loss < best:
        best, waited = val_loss, 0
    else:
        waited += 1
        if waited > 2:
            break
print(best)
"""


def _migrate(tmp_path, imports: str, setup: str, valid: str, reader: str = READER):
    (tmp_path / "reader.py").write_text(reader)
    entry = tmp_path / "train.py"
    text = ENTRY.replace("@IMPORT@", imports).replace("@SETUP@", setup)
    entry.write_text(text.replace("@VALID@", valid))
    return migrate_bytes(entry.read_bytes(), str(entry), Options())


def test_the_helpers_that_draw_are_known_by_the_names_the_file_calls_them(tmp_path):
    (tmp_path / "reader.py").write_text(READER)
    (tmp_path / "train.py").write_text("import reader\nfrom reader import Reader as R\n")
    found = helper_draws(ast.parse((tmp_path / "train.py").read_text()), tmp_path / "train.py")
    assert found["reader.sample_batch"].draw == "numpy.random.choice"
    assert found["reader.batch_of"].methods is None  # through the module's own function
    assert "reader.fixed_batch" not in found
    assert found["reader.Reader"].methods == {"batches", "valid"}  # `valid` through self
    assert found["reader.Splitter"].methods == {"*"}  # its constructor draws


@pytest.mark.parametrize(
    ("imports", "setup", "valid"),
    [
        ("import reader", "", "reader.sample_batch(16)"),
        ("from reader import batch_of", "", "batch_of(16)"),
        ("from reader import Reader", "data = Reader(64)", "data.valid(16)"),
        ("import reader as r", "data = r.Reader(64)\nstream = data.batches(16)", "next(stream)"),
        (
            "from reader import Splitter",
            "split = Splitter(64)\nxs = torch.randn(64, 4)",
            "xs[split.held_out()], xs[split.held_out()][:, :1]",
        ),
    ],
)
def test_an_early_stop_on_a_helpers_own_draws_is_refused(tmp_path, imports, setup, valid):
    result = _migrate(tmp_path, imports, setup, valid)
    assert result.migrated is None, result.migrated
    refused = [f for f in result.findings if f.code == "MIG953"]
    assert refused and "this process's value" in refused[0].message, result.findings


@pytest.mark.parametrize(
    ("imports", "setup", "valid", "reader"),
    [
        ("from reader import fixed_batch", "", "fixed_batch(16)", READER),
        ("from reader import Reader", "data = Reader(64)", "data.fixed(16)", READER),
        (
            "import reader",
            "",
            "reader.sample_batch(16)",
            READER.replace("import torch\n", "import torch\n\nnp.random.seed(0)\n"),
        ),
    ],
)
def test_helpers_that_draw_alike_on_every_process_decide_alike(
    tmp_path, imports, setup, valid, reader
):
    result = _migrate(tmp_path, imports, setup, valid, reader)
    assert result.migrated is not None, result.findings
    assert not [f for f in result.findings if f.code == "MIG953"], result.findings


def test_a_seed_in_the_file_makes_the_helpers_draws_alike(tmp_path):
    seeded = "import numpy as np\nimport reader\n\nnp.random.seed(1234)"
    result = _migrate(tmp_path, seeded, "", "reader.sample_batch(16)")
    assert result.migrated is not None, result.findings
    assert "np.random.seed(1234)" in result.migrated.decode()


def test_an_output_of_a_helpers_draws_is_noted_as_this_processes_own(tmp_path):
    (tmp_path / "reader.py").write_text(READER)
    entry = tmp_path / "train.py"
    entry.write_text(
        textwrap.dedent("""\
        import torch
        from reader import Reader

        data = Reader(64)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in data.batches(8):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        vx, vy = data.valid(16)
        print(torch.nn.functional.mse_loss(model(vx), vy).item())
        """)
    )
    result = migrate_bytes(entry.read_bytes(), str(entry), Options())
    notes = [f for f in result.findings if f.code == "MIG953"]
    assert notes and "own random draws" in notes[0].message, result.findings


DATA = """\
import torch
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset, random_split

SET = TensorDataset(torch.arange(256.0).reshape(64, 4), torch.arange(64.0).reshape(64, 1))


def load(batch_size=8):
    train, test = @SPLIT@
    return DataLoader(train, batch_size=batch_size, shuffle=True), DataLoader(test, batch_size=8)
"""

TRAIN = """\
import torch
@IMPORT@
@SEED@
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
train_loader, test_loader = @LOAD@
for epoch in range(2):
    for x, y in train_loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def _split_program(tmp_path, split, seed="", imports="from data import load", load="load()"):
    (tmp_path / "data.py").write_text(DATA.replace("@SPLIT@", split))
    entry = tmp_path / "train.py"
    text = TRAIN.replace("@IMPORT@", imports).replace("@SEED@", seed).replace("@LOAD@", load)
    entry.write_text(text)
    return migrate_bytes(entry.read_bytes(), str(entry), Options())


@pytest.mark.parametrize(
    ("split", "imports", "load", "draw"),
    [
        ("random_split(SET, [48, 16])", "from data import load", "load()", "random_split"),
        (
            "train_test_split(SET, test_size=0.25)",
            "import data",
            "data.load(8)",
            "train_test_split",
        ),
    ],
)
def test_loaders_a_helper_splits_per_process_are_refused(tmp_path, split, imports, load, draw):
    """A helper module's unseeded split (h11 review: a `random_split` in `dataset.py` gave each
    process its own train and test sets)."""
    result = _split_program(tmp_path, split, imports=imports, load=load)
    assert result.migrated is None, result.migrated
    refused = [f for f in result.findings if f.code == "MIG953"]
    assert refused and "own random draws" in refused[0].message, result.findings
    assert draw in refused[0].message and "load()` draws with" in refused[0].message


@pytest.mark.parametrize(
    ("split", "seed"),
    [
        ("random_split(SET, [48, 16], generator=torch.Generator().manual_seed(1))", ""),
        ("train_test_split(SET, test_size=0.25, random_state=3)", ""),
        ("random_split(SET, [48, 16])", "torch.manual_seed(0)"),
    ],
)
def test_loaders_split_alike_on_every_process_migrate(tmp_path, split, seed):
    result = _split_program(tmp_path, split, seed=seed)
    assert result.migrated is not None, result.findings
    assert "accelerator.prepare(" in result.migrated.decode()


AUGMENTING = {
    # transforms made in the data set's constructor
    "class": (
        "import torchvision.transforms as T\n"
        "from torch.utils.data import Dataset\n\n\n"
        "class Pairs(Dataset):\n"
        "    def __init__(self, n):\n"
        "        self.x = torch.randn(n, 3, 8, 8)\n"
        "        self.aug = T.Compose([T.RandomHorizontalFlip(), T.ColorJitter(0.4)])\n\n"
        "    def __len__(self):\n        return len(self.x)\n\n"
        "    def __getitem__(self, i):\n        return self.aug(self.x[i]), torch.tensor(0)\n"
    ),
    # a module-level transform the helper applies
    "module": (
        "from torchvision import transforms\n"
        "from torch.utils.data import TensorDataset\n\n"
        "augment = transforms.RandomResizedCrop(8)\n\n\n"
        "def Pairs(n):\n"
        "    x = torch.stack([augment(torch.randn(3, 8, 8)) for _ in range(n)])\n"
        "    return TensorDataset(x, torch.zeros(n, dtype=torch.long))\n"
    ),
}
AUGMENTED_TRAIN = """\
import torch
from torch.utils.data import DataLoader

from data import Pairs

torch.manual_seed(7)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Pairs(32), batch_size=8, shuffle=True, num_workers=2)
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize("spelling", sorted(AUGMENTING))
def test_random_transforms_of_another_module_are_seeded_apart_per_process(tmp_path, spelling):
    """The data set of `data.py` augments at random (h12 review: SimCLR's augmentations were
    the same on every process): after the prepare, process k seeds torch with the program's
    seed + k, as for transforms made in the file itself."""
    (tmp_path / "data.py").write_text("import torch\n" + AUGMENTING[spelling])
    entry = tmp_path / "train.py"
    entry.write_text(AUGMENTED_TRAIN)
    result = migrate_bytes(entry.read_bytes(), str(entry), Options())
    assert result.migrated is not None, result.findings
    assert b"torch.manual_seed(7 + accelerator.process_index)" in result.migrated
    assert any(f.code == "MIG009" for f in result.findings)


def test_a_helper_module_without_random_layers_adds_no_seed(tmp_path):
    (tmp_path / "data.py").write_text(
        "import torch\nfrom torch.utils.data import TensorDataset\n\n\n"
        "def Pairs(n):\n    return TensorDataset(torch.ones(n, 3, 8, 8), torch.zeros(n).long())\n"
    )
    entry = tmp_path / "train.py"
    entry.write_text(AUGMENTED_TRAIN)
    result = migrate_bytes(entry.read_bytes(), str(entry), Options())
    assert result.migrated is not None, result.findings
    assert b"process_index" not in result.migrated
