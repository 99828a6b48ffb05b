"""Two rules from the h12 review of a GraphSAGE script:

- an accumulation step count that is a helper's parameter (`train_epoch(..., accum_steps)`)
  which every call fills with the same value the owner can write (`args.accum_steps` from
  `main()`) is read there by the Accelerator (was a MIG900 saying `main()` could not read it);
- a loader that builds its batches in an iterator of its own (PyG's `NeighborLoader`, DGL's
  `dgl.dataloading.DataLoader`) is not prepared: prepare rebuilds a plain DataLoader and the
  loop would get the sampler's raw output; a MIG900 says how to shard it by hand.
"""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

SCRIPT = """\
import argparse

import torch
{imports}


def train_epoch(model, loader, optimizer, {param}=1):
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y) / {param}
        loss.backward()
        if (i + 1) % {param} == 0:
            optimizer.step()
            optimizer.zero_grad()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum", type=int, default=2)
    args = parser.parse_args()
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = {loader}
    for epoch in range(2):
        train_epoch(model, loader, optimizer, {passed})


if __name__ == "__main__":
    main()
"""
PLAIN = (
    "from torch.utils.data import DataLoader, TensorDataset",
    "DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)",
)


@pytest.mark.parametrize(
    ("param", "passed"),
    [("accum_steps", "args.accum"), ("k", "args.accum"), ("accum_steps", "accum_steps=args.accum")],
)
def test_a_helper_parameter_every_call_fills_alike_is_read_by_the_accelerator(param, passed):
    imports, loader = PLAIN
    source = SCRIPT.format(imports=imports, loader=loader, param=param, passed=passed)
    output, findings = migrate_text(source.replace("accum_steps=args.accum", f"{param}=args.accum"))
    assert output is not None, [f.message for f in findings]
    assert "Accelerator(gradient_accumulation_steps=args.accum)" in output
    assert "with accelerator.accumulate(model):" in output


def test_calls_that_pass_different_values_still_refuse():
    imports, loader = PLAIN
    source = SCRIPT.format(imports=imports, loader=loader, param="k", passed="args.accum")
    source = source.replace(
        "        train_epoch(model, loader, optimizer, args.accum)\n",
        "        train_epoch(model, loader, optimizer, args.accum)\n"
        "    train_epoch(model, loader, optimizer, 4)\n",
    )
    output, findings = migrate_text(source)
    assert output is None
    assert any(f.code == "MIG900" and "fixed when it is made" in f.message for f in findings)


@pytest.mark.parametrize(
    ("imports", "loader"),
    [
        (
            "from torch_geometric.loader import NeighborLoader",
            "NeighborLoader(data, num_neighbors=[5], batch_size=4, input_nodes=idx)",
        ),
        ("import dgl", "dgl.dataloading.DataLoader(graph, idx, sampler, batch_size=4)"),
    ],
)
def test_a_loader_sampling_in_its_own_iterator_is_not_prepared(imports, loader):
    source = SCRIPT.format(imports=imports, loader=loader, param="k", passed="args.accum")
    output, findings = migrate_text(source)
    assert output is None
    [refusal] = [f for f in findings if f.code == "MIG900"]
    assert "builds its batches in an iterator of its own" in refusal.message
    assert "input_nodes" in refusal.message
