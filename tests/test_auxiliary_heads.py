"""A torchvision segmentation model built with its auxiliary head on (`fcn_resnet50(weights=
"DEFAULT")`: pretrained weights turn `aux_loss` on; `aux_loss=True`) computes the head in every
forward; where the program reads only `output["out"]`, no loss reaches the head's parameters,
and DDP fails at the second step (h8 house segmentation). MIG008 makes DDP find them."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

SCRIPT = """\
import torch
{imports}
from torch.utils.data import DataLoader, TensorDataset

model = {builder}
loader = DataLoader(TensorDataset(torch.randn(8, 3, 32, 32), torch.randint(0, 3, (8, 32, 32))))
optimizer = torch.optim.Adam(model.parameters())
for x, y in loader:
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out["out"], y){aux}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

BUILT = {
    "weights": (
        "import torchvision",
        'torchvision.models.segmentation.fcn_resnet50(weights="DEFAULT")',
    ),
    "aux_loss": (
        "from torchvision.models.segmentation import deeplabv3_resnet50",
        "deeplabv3_resnet50(weights=None, num_classes=3, aux_loss=True)",
    ),
}


@pytest.mark.parametrize("built", BUILT)
def test_an_unread_auxiliary_head_finds_unused_parameters(built):
    imports, builder = BUILT[built]
    output, findings = migrate_text(SCRIPT.format(imports=imports, builder=builder, aux=""))
    assert output is not None, [f.message for f in findings]
    assert "DistributedDataParallelKwargs(find_unused_parameters=True)" in output
    notes = [f.message for f in findings if f.code == "MIG008"]
    assert len(notes) == 1 and "`aux_classifier`" in notes[0]


@pytest.mark.parametrize(
    ("builder", "aux"),
    [
        ('torchvision.models.segmentation.fcn_resnet50(weights="DEFAULT")',
         ' + 0.4 * torch.nn.functional.cross_entropy(out["aux"], y)'),
        ("torchvision.models.segmentation.fcn_resnet50(weights=None, num_classes=3)", ""),
    ],
)  # fmt: skip
def test_a_head_read_or_off_needs_nothing(builder, aux):
    output, findings = migrate_text(
        SCRIPT.format(imports="import torchvision", builder=builder, aux=aux)
    )
    assert output is not None, [f.message for f in findings]
    assert "find_unused_parameters" not in output
