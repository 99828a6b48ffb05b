"""A training loop over an instance of the program's own batch iterator (a class with
`__iter__` and no base, like a GPU-resident loader that slices tensors itself): `prepare`
would pass it through unsharded, so it is not prepared and a MIG905 note names it, instead of
the MIG006 note that claims each process draws its own batches. A DataLoader subclass is
still a DataLoader."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

PROGRAM = """\
import torch


class {name}{bases}:
    def __init__(self, x, y, batch_size):
        self.x, self.y, self.batch_size = x, y, batch_size

    def __iter__(self):
        for i in range(0, len(self.x), self.batch_size):
            yield self.x[i : i + self.batch_size], self.y[i : i + self.batch_size]

    def __len__(self):
        return (len(self.x) + self.batch_size - 1) // self.batch_size


device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
X, Y = torch.randn(64, 4).to(device), torch.randn(64, 1).to(device)
loader = {name}(X, Y, 8)
model = torch.nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    steps = 0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
    print("steps", steps)
"""


def _migrate(name: str, bases: str = "") -> tuple[str, list]:
    output, findings = migrate_text(PROGRAM.format(name=name, bases=bases))
    assert output is not None, [f.message for f in findings]
    return output, findings


def test_the_programs_own_batch_iterator_is_named_and_not_prepared():
    for name in ("GPULoader", "BatchStream"):
        output, findings = _migrate(name)
        assert "model, opt = accelerator.prepare(model, opt)\n" in output
        notes = [f for f in findings if f.code == "MIG905"]
        assert len(notes) == 1 and f"`loader` is a `{name}`" in notes[0].message
        assert not any(f.code == "MIG006" for f in findings)  # no claim that it is sharded


def test_a_dataloader_subclass_is_still_prepared():
    output, _ = _migrate("FastLoader", "(torch.utils.data.DataLoader)")
    assert "model, opt, loader = accelerator.prepare(model, opt, loader)\n" in output


def test_two_processes_each_draw_every_batch_of_the_own_iterator(tmp_path):
    output, _ = _migrate("GPULoader")
    (tmp_path / "migrated.py").write_text(output)
    done = launch(tmp_path / "migrated.py", tmp_path)
    assert done.stdout.splitlines().count("steps 8") == 2  # 64 / 8, each epoch, main prints


TORCHTEXT = """\
import torch
from torchtext.data import BucketIterator

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
train_iter, test_iter = BucketIterator.splits((train_data, test_data), batch_size=32,
                                              device=device)
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(2):
    for batch in train_iter:
        loss = model(batch.src).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_torchtexts_iterators_are_named_and_not_prepared():
    output, findings = migrate_text(TORCHTEXT)
    assert output is not None
    assert "model, optimizer = accelerator.prepare(model, optimizer)\n" in output
    notes = [f.message for f in findings if f.code == "MIG905"]
    assert any("`train_iter` is a torchtext `BucketIterator`" in n for n in notes), notes
    assert not any(f.code == "MIG006" for f in findings)


STEPS = """\
import torch

from data import sample_data, make_loader

loader = make_loader()
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters())
batches = sample_data(loader)
steps = range(1000)
for step in steps:
    x, y = next(batches)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_loop_over_step_numbers_whose_batches_are_not_followed_is_refused():
    # `batches` comes from another module's generator: a `range` is never the loader
    output, findings = migrate_text(STEPS)
    assert output is None
    assert any(
        f.code == "MIG900" and "iterates `steps`, a `range` of numbers" in f.message
        for f in findings
    ), [(f.code, f.message) for f in findings]


SEEDS = """\
import numpy as np
import torch


def train(seed):
    torch.manual_seed(int(seed))
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(10):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


seeds = {seeds}
for seed in seeds:
    print(train(seed))
"""


def test_an_array_of_numbers_a_loop_runs_training_over_is_never_prepared():
    """`for seed in np.arange(1, 20): train(seed)` (h11 review: the seeds were prepared as a
    loader, with a note that each process draws its own batches of them)."""
    for seeds in ("np.arange(1, 20)", "np.linspace(0, 1, 5)", "torch.arange(3)"):
        output, findings = migrate_text(SEEDS.format(seeds=seeds))
        assert output is not None, findings
        assert "prepare(seeds)" not in output and "seeds = accelerator" not in output, output
        assert "model, optimizer = accelerator.prepare(model, optimizer)" in output
        assert not [f for f in findings if f.code == "MIG006" and "`seeds`" in f.message]
