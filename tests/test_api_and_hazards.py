"""The API as it is and DDP hazards (SPEC §3b.5, §3b.6): clipping keeps torch's function when
called with what the accelerator's does not take; a forward that may leave parameters unused
gets find_unused_parameters=True (MIG008); an autocast the Accelerator cannot take over stays
the script's own."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

SCRIPT = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)
        self.aux = nn.Linear(8, 2)
        self.act = nn.ReLU()

    def forward(self, x):
{forward}


loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=8)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    {clip}
    optimizer.step()
"""

ALL_USED = "        h = self.act(self.body(x))\n        return self.head(h) + self.aux(h)"
CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"


def migrate(forward=ALL_USED, clip=CLIP):
    output, findings = migrate_text(SCRIPT.format(forward=forward, clip=clip))
    assert output is not None, [f.message for f in findings]
    return output, findings


@pytest.mark.parametrize(
    "forward",
    [
        "        return self.head(self.act(self.body(x)))",
        (
            "        h = self.body(x)\n        if self.training:\n            h = h + self.aux(h)\n"
            "        return self.head(h)"
        ),
        "        h = self.body(x)\n        return self.head(h) if x.sum() > 0 else self.aux(h)",
    ],
    ids=["never-read", "under-an-if", "conditional-expression"],
)
def test_a_forward_that_may_skip_parameters_asks_ddp_to_find_them(forward):
    output, findings = migrate(forward)
    assert "kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]" in output
    assert "from runtime import Accelerator, DistributedDataParallelKwargs" in output
    assert [f.code for f in findings if f.code == "MIG008"] == ["MIG008"]


@pytest.mark.parametrize(
    "forward",
    [ALL_USED, "        return sum(m(x).sum() for m in self.children() if m is not self.act)"],
    ids=["all-read", "read-by-name"],
)
def test_a_forward_using_every_parameter_asks_nothing(forward):
    output, findings = migrate(forward)
    assert "kwargs_handlers" not in output and not [f for f in findings if f.code == "MIG008"]


@pytest.mark.parametrize(
    "clip, kept",
    [
        ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)",
         "`error_if_nonfinite=`"),
        ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)", "`foreach=`"),
        ("nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5, foreach=True)",
         "`foreach=`"),
    ],
)  # fmt: skip
def test_clipping_with_arguments_the_accelerator_does_not_take_stays_torch_s(clip, kept):
    output, findings = migrate(clip=clip)
    assert clip in output and "accelerator.clip_grad" not in output
    note = next(f for f in findings if f.code == "MIG021")
    assert note.level == "note" and kept in note.message


def test_clipping_with_the_accelerator_s_arguments_goes_through_it():
    output, _ = migrate(clip="torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=2)")
    assert "accelerator.clip_grad_norm_(model.parameters(), 1.0, norm_type=2)" in output


def test_kept_clipping_under_fp16_unscales_first():
    source = (
        SCRIPT.format(
            forward=ALL_USED,
            clip="torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)",
        )
        .replace(
            "    loss = nn.functional.cross_entropy(model(x), y)\n",
            "    with torch.autocast('cuda', dtype=torch.float16):\n"
            "        loss = nn.functional.cross_entropy(model(x), y)\n",
        )
        .replace(  # fp16 with its GradScaler (without one the autocast is kept as it is)
            "    loss.backward()\n",
            "    scaler.scale(loss).backward()\n    scaler.unscale_(optimizer)\n",
        )
        .replace("    optimizer.step()\n", "    scaler.step(optimizer)\n    scaler.update()\n")
        .replace(
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scaler = torch.cuda.amp.GradScaler()\n",
        )
    )
    output, _ = migrate_text(source)
    assert (
        "    accelerator.unscale_gradients()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)\n"
    ) in output
