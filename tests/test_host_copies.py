"""Host copies stay (SPEC §3b.5): `.to("cpu")` of a batch is never batch placement, and items
the original kept on the host are read there with `.cpu()` once a prepared loader puts them on
the accelerator's device (the held-out review: a YOLO script's `.to("cpu")` image handed to a
plot, a ViT solver's labels collected beside `logits.cpu()`)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

LOOP = """\
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 3).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,))), batch_size=4)
seen = []
for x, y in loader:
    {placement}
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    {read}
"""


@pytest.mark.parametrize(
    "read",
    [
        'seen.append(x[0].to("cpu"))',
        "seen.append(x[0].to(torch.device('cpu')))",
        'seen.append(x[0].to("cpu", non_blocking=True))',
        'seen.append(x[0].to(device="cpu"))',
    ],
)
def test_a_copy_to_the_host_stays(read):
    output, findings = migrate_text(LOOP.format(placement="x = x.to(device)", read=read))
    assert output is not None, findings
    assert f"    {read}\n" in output
    assert "x = x.to(device)" not in output


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        ("seen.append(y)", "seen.append(y.cpu())"),
        ("seen.extend(y)", "seen.extend(y.cpu())"),
        ("seen.append(y.numpy())", "seen.append(y.cpu().numpy())"),
        ("seen.append(np.asarray(y))", "seen.append(np.asarray(y.cpu()))"),
        ("seen.append(int((logits.argmax(1).cpu() == y).sum()))",
         "seen.append(int((logits.argmax(1).cpu() == y.cpu()).sum()))"),
        ("preds = logits.detach().cpu().argmax(1)\n    seen.append(preds - y)",
         "preds = logits.detach().cpu().argmax(1)\n    seen.append(preds - y.cpu())"),
    ],
)  # fmt: skip
def test_labels_the_original_kept_on_the_host_are_read_there(read, expected):
    output, findings = migrate_text(LOOP.format(placement="x = x.to(device)", read=read))
    assert output is not None, findings
    assert f"    {expected}\n" in output
    # the labels the loss reads on the device keep their (now removed) placement's meaning
    assert "cross_entropy(logits, y)" in output


@pytest.mark.parametrize(
    ("placement", "read"),
    [
        ("pass", "seen.append(y)"),  # nothing placed: the script ran on one device
        ("x, y = x.to(device), y.to(device)", "seen.append(y)"),  # y moved too
        ("x = x.to(device)", "seen.append(y.size(0))"),  # a size, not a tensor
        ("x = x.to(device)", "seen.append(loss + y.float().mean())"),  # meets device values
    ],
)
def test_items_not_kept_on_the_host_get_no_copy(placement, read):
    source = LOOP.format(placement=placement, read=read).replace("y.to(device))", "y)")
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert "y.cpu()" not in output


def test_a_cpu_only_scripts_cpu_placement_goes_as_any_placement():
    # `x.to("cpu")` is where this script trains (`Accelerator(cpu=True)`), not a host copy
    source = (
        LOOP.format(placement='x = x.to("cpu")', read="pass")
        .replace('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n', "")
        .replace(".to(device)", "")
    )
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert "Accelerator(cpu=True)" in output
    assert 'x.to("cpu")' not in output
    assert "for x, y in loader:\n    logits = model(x)\n" in output
