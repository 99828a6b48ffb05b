"""Which models an optimizer trains (issue 16): through a list of parameters bound first, and
the precise MIG900 where it holds parts of models. The goldens optimizer_params_list and
function_model_forward_call cover the shapes that migrate."""

from __future__ import annotations

import textwrap

from migrator.engine import migrate_text

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)
encoder = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
decoder = nn.Linear(4, 1)
{params}
optimizer = torch.optim.Adam(params)
for x, y in loader:
    loss = nn.functional.mse_loss(decoder(encoder(x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def run(params: str):
    return migrate_text(SCRIPT.format(params=textwrap.dedent(params).strip()))


def test_parameters_gathered_from_whole_models_train_both():
    output, findings = run("params = list(decoder.parameters()) + list(encoder.parameters())")
    assert not [f for f in findings if f.level == "warning"]
    assert "decoder, encoder, optimizer, loader = accelerator.prepare(" in output


def test_parameters_of_parts_of_a_model_are_refused_naming_the_parts():
    output, findings = run("params = list(decoder.parameters()) + list(encoder[1].parameters())")
    assert output is None
    messages = [f.message for f in findings if f.code == "MIG900"]
    assert len(messages) == 1
    assert "`params` (line 8)" in messages[0] and "`encoder[1]`" in messages[0], messages


def test_a_list_bound_twice_is_not_followed():
    output, findings = run("""
        params = list(decoder.parameters())
        params = params + list(encoder.parameters())
    """)
    assert output is None
    assert any("could not tell which model" in f.message for f in findings), findings
