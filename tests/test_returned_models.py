"""`model = train_model(model, optimizer, epochs)`: the call hands the objects to the function
that trains them, and the model it returns is the one it was given. The call is a use, not a
definition: prepare goes before it. Read as a definition, prepare went after training, so
every process trained its own copy on the whole dataset."""

from __future__ import annotations

import re

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

SCRIPT = """\
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
loader = DataLoader(data, batch_size=8)


def train_model(model, optimizer, epochs):
    batches = 0
    for _epoch in range(epochs):
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            batches += 1
    sys.stdout.write(f"batches {batches}\\n")
    return model


model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
model = train_model(model, optimizer, epochs=2)
total = sum(float(p.detach().abs().sum()) for p in model.parameters())
sys.stdout.write(f"weights {total:.6f}\\n")
"""


def test_prepare_goes_before_the_call_that_trains_and_returns_the_model():
    output, findings = migrate_text(SCRIPT)
    assert output is not None, [f.message for f in findings]
    assert (
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.5)\n"
        "\n"
        "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "model = train_model(model, optimizer, epochs=2)\n"
    ) in output
    assert output.count("accelerator.prepare(") == 1


def test_the_returned_model_trained_on_shards_and_agrees_on_two_processes(tmp_path):
    output, _findings = migrate_text(SCRIPT)
    script = tmp_path / "returned.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # 64 samples, batch 8, two processes: 4 batches each per epoch, 2 epochs
    assert re.findall(r"^batches (\d+)$", out, re.MULTILINE) == ["8", "8"], out
    weights = re.findall(r"^weights (\S+)$", out, re.MULTILINE)
    assert len(weights) == 2 and weights[0] == weights[1], out  # gradients were averaged


PAIR = """\
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)


def train(G, D, epochs):
    opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
    for _epoch in range(epochs):
        for (x,) in loader:
            opt_d.zero_grad()
            loss_d = D(G(x).detach()).mean() - D(x).mean()
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = -D(G(x)).mean()
            loss_g.backward()
            opt_g.step()
    return {returned}


{unpacked} = train(nn.Linear(4, 4), nn.Linear(4, 1), epochs=1)
keys = sorted([*G.state_dict(), *D.state_dict()])
sys.stdout.write(f"keys {{keys}}\\n")
nn.Linear(4, 4).load_state_dict(G.state_dict())
"""

RETURNS = {
    "tuple": ("G, D", "G, D", "accelerator.unwrap_model(G), accelerator.unwrap_model(D)"),
    "list": ("[G, D]", "G, D", "[accelerator.unwrap_model(G), accelerator.unwrap_model(D)]"),
    "dict": (
        '{"gen": G, "disc": D}',
        "models",
        '{"gen": accelerator.unwrap_model(G), "disc": accelerator.unwrap_model(D)}',
    ),
}


def _pair(kind: str) -> str:
    returned, unpacked, _ = RETURNS[kind]
    script = PAIR.format(returned=returned, unpacked=unpacked)
    if kind == "dict":
        script = script.replace("keys = ", 'G, D = models["gen"], models["disc"]\nkeys = ')
    return script


@pytest.mark.parametrize("kind", RETURNS)
def test_models_returned_together_are_handed_back_unwrapped(kind):
    output, findings = migrate_text(_pair(kind))
    assert output is not None, [f.message for f in findings]
    assert f"    return {RETURNS[kind][2]}\n" in output


@pytest.mark.slow
def test_returned_models_keep_their_keys_on_two_processes(tmp_path):
    """Handed back wrapped, `G.state_dict()` named every key `module.weight`, and a plain
    model could not load it."""
    output, _findings = migrate_text(_pair("tuple"))
    script = tmp_path / "pair.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    expected = "keys ['bias', 'bias', 'weight', 'weight']"
    assert out.count(expected) == 2, out
