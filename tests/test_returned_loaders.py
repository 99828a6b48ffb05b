"""Loaders returned together (SPEC §3b.1, §3b.8): a call that returns the training loader
returns loaders, even where the function that makes them is in a module the program does not
join (it has no training step) or that is not here at all. Each of its results a loop runs the
model on is prepared with the training loader, not left plain with a note that says the
program "does not show" it is a DataLoader; a result no loop draws from (a dataset, a vocabulary)
is not prepared."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

EVALUATE = """\
def evaluate(model, loader):
    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            seen += y.size(0)
    return correct / seen
"""

IN_FUNCTION = """\
import torch
from torch import nn

{imports}


{evaluate}

def main():
    torch.manual_seed(0)
    {unpack}
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        print(f"epoch {{epoch}} accuracy {{evaluate(model, val_loader):.4f}}")


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    "imports, unpack",
    [
        ("from data_lib import get_loaders", "train_loader, val_loader, _ = get_loaders(8)"),
        ("import data_lib", "train_loader, val_loader, _ = data_lib.get_loaders(batch_size=8)"),
        ("from data_lib import get_loaders as build",
         "(train_loader, val_loader, val_set) = build(8)"),
        ("import data_lib", "[train_loader, val_loader, _] = data_lib.get_loaders(8)"),
    ],
)  # fmt: skip
def test_a_loader_returned_with_the_training_loader_is_prepared_with_it(imports, unpack):
    source = IN_FUNCTION.format(imports=imports, unpack=unpack, evaluate=EVALUATE)
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert "train_loader, val_loader = accelerator.prepare(" in output
    assert "val_set" not in output.split("accelerator.prepare(")[1].split(")")[0]
    assert not [f for f in findings if "does not show" in f.message], [f.message for f in findings]
    assert "outputs, y = accelerator.gather_for_metrics((outputs, y))" in output


MODULE_LEVEL = """\
import torch
from torch import nn

from utils import split_loaders

{evaluate}

def train_model(model, optimizer, train_dataloader, validation_dataloader, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_dataloader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        print(f"epoch {{epoch}} accuracy {{evaluate(model, validation_dataloader):.4f}}")


train_dataloader, validation_dataloader = split_loaders(0.25)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_model(model, optimizer, train_dataloader, validation_dataloader, 2)
"""


def test_loaders_unpacked_at_module_level_and_handed_to_the_training_function():
    output, findings = migrate_text(MODULE_LEVEL.format(evaluate=EVALUATE))
    assert output is not None, [f.message for f in findings]
    prepared = re.search(r"^(.*) = accelerator\.prepare\(", output, re.MULTILINE)
    assert prepared is not None
    assert "validation_dataloader" in output[prepared.start() : output.index(")", prepared.end())]
    assert not [f for f in findings if "does not show" in f.message]


def test_a_returned_value_no_loop_draws_from_is_not_prepared():
    """`vocab` comes back with the training loader; it is read, never iterated by a loop that
    runs the model: it is no loader to prepare."""
    source = IN_FUNCTION.format(
        imports="from data_lib import get_loaders",
        unpack="train_loader, vocab = get_loaders(8)\n    val_loader = train_loader",
        evaluate=EVALUATE,
    ).replace('print(f"epoch', 'print(len(vocab), f"epoch')
    output, _findings = migrate_text(source)
    assert output is not None
    assert "vocab" not in output.split("accelerator.prepare(")[1].split(")")[0]


def test_loaders_returned_without_the_training_loader_keep_their_note():
    """Nothing says `get_eval_loaders()` makes loaders: the training loader is made here."""
    source = IN_FUNCTION.format(
        imports="from torch.utils.data import DataLoader, TensorDataset\n"
        "from data_lib import get_eval_loaders",
        unpack="train_loader = DataLoader(TensorDataset(torch.randn(32, 4), "
        "torch.randint(0, 2, (32,))), batch_size=8)\n    val_loader, _ = get_eval_loaders(8)",
        evaluate=EVALUATE,
    )
    output, findings = migrate_text(source)
    assert output is not None
    assert "val_loader" not in output.split("accelerator.prepare(")[1].split(")")[0]
    assert [f for f in findings if "does not show" in f.message]


DATA_LIB = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def get_loaders(batch_size):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(96, 4, generator=generator)
    y = (x.sum(1) > 0).long()
    train_set, val_set = TensorDataset(x[:64], y[:64]), TensorDataset(x[64:], y[64:])
    return (DataLoader(train_set, batch_size=batch_size, shuffle=False),
            DataLoader(val_set, batch_size=batch_size), val_set)
"""


@pytest.mark.slow
def test_the_evaluation_on_two_processes_prints_the_one_process_accuracy(tmp_path):
    """32 validation samples in batches of 8 split evenly over 2 processes; the lr is 0, so
    training on the shards does not change what is evaluated."""
    source = IN_FUNCTION.format(
        imports="from data_lib import get_loaders",
        unpack="train_loader, val_loader, _ = get_loaders(8)",
        evaluate=EVALUATE,
    ).replace("lr=0.1", "lr=0.0")
    (tmp_path / "data_lib.py").write_text(DATA_LIB)
    (tmp_path / "main.py").write_text(source)
    single = subprocess.run([sys.executable, "main.py"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, check=True)  # fmt: skip
    expected = re.findall(r"^epoch \d accuracy [\d.]+$", single.stdout, re.MULTILINE)
    assert len(expected) == 2
    (tmp_path / "main.py").write_text(migrate_text(textwrap.dedent(source))[0])
    done = launch(tmp_path / "main.py", tmp_path)
    assert re.findall(r"^epoch \d accuracy [\d.]+$", done.stdout, re.MULTILINE) == expected
