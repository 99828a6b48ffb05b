"""A training loop in a function that reads the training objects from where it is called (a
nested `def train_one_epoch():` over the enclosing function's names, a module function over
module globals) is run by its calls: each call is a use of the objects it reads, so prepare
goes before it - in each branch that makes its own objects and calls its own closure (h8
BTC-Predictor: a `reg` and a `cls` mode each built a model and trained it through a nested
function; prepare went after both branches, or in one, and the other trained plain objects
with its placement removed)."""

from __future__ import annotations

import re

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

BRANCHES = """\
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def main(kind):
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64)), batch_size=8)
    if kind == "reg":
        model = torch.nn.Linear(4, 1)
        model.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def train_one_epoch():
            steps = 0
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                steps += 1
            return steps

        for epoch in range(2):
            sys.stdout.write(f"reg steps {{train_one_epoch()}}\\n")
    {otherwise}:
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def train_one_epoch():
            steps = 0
            for x, y in loader:
                x = x.to(device)
                y = (y.to(device) > 0).float()
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    model(x).squeeze(1), y
                )
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                steps += 1
            return steps

        for epoch in range(2):
            sys.stdout.write(f"cls steps {{train_one_epoch()}}\\n")


if __name__ == "__main__":
    main(sys.argv[1])
"""

OTHERWISE = {"elif": 'elif kind == "cls"', "else": "else"}


def _migrated(otherwise: str) -> str:
    output, findings = migrate_text(BRANCHES.format(otherwise=OTHERWISE[otherwise]))
    assert output is not None, [f.message for f in findings]
    return output


@pytest.mark.parametrize("otherwise", OTHERWISE)
def test_each_branch_prepares_the_objects_its_closure_trains(otherwise):
    output = _migrated(otherwise)
    prepares = [m.start() for m in re.finditer(r"accelerator\.prepare\(", output)]
    closures = [m.start() for m in re.finditer(r"def train_one_epoch\(\):", output)]
    assert len(prepares) == 2 and len(closures) == 2
    assert prepares[0] < closures[0] < prepares[1] < closures[1]
    assert "model, optimizer, loader = accelerator.prepare(" in output


def test_a_closure_defined_before_the_optimizer_is_prepared_for_after_it():
    source = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
    model = torch.nn.Linear(4, 1)

    def epoch():
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        epoch()


main()
"""
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    prepare = output.index("model, optimizer, loader = accelerator.prepare(")
    assert output.index("optimizer = torch.optim.SGD") < prepare < output.index("for _ in range")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["reg", "cls"])
def test_either_mode_trains_on_its_share_on_two_processes(mode, tmp_path):
    script = tmp_path / "modes.py"
    script.write_text(_migrated("elif"))
    out = launch(script, tmp_path, mode).stdout
    # 64 samples, batch 8, two processes: 4 steps a process in each epoch (each writes)
    assert re.findall(rf"^{mode} steps (\d+)$", out, re.MULTILINE) == ["4"] * 4, out
