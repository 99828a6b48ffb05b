"""MIG032: a running sum started before a `with` that holds its loop (`with tqdm(total=n) as
bar:`, `with torch.no_grad():`, nested ones) is whole once the `with` ends: it is reduced right
after it, where the program reads it, when no read inside the `with` would see it early."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

PROGRAM = """\
import torch
from tqdm import tqdm
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr={lr})
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min", patience=1)
for epoch in range(2):
    epoch_loss = 0
{loop}    avg_loss = epoch_loss / len(loader)
    scheduler.step(avg_loss)
    print(f"Loss {{avg_loss:.6f}}")
"""

BODY = """\
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
"""

WITHS = {
    "progress bar context": (
        "    with tqdm(total=len(loader), disable=True) as bar:\n"
        "        for x, y in loader:\n" + BODY + "            bar.update(1)\n"
    ),
    "two contexts nested": (
        "    with tqdm(total=len(loader), disable=True) as bar:\n"
        "        with torch.autograd.set_detect_anomaly(False):\n"
        "            for x, y in loader:\n"
        + BODY.replace("\n    ", "\n        ").replace(
            "            loss =", "                loss =", 1
        )
    ),
    "one with of two contexts": (
        "    with tqdm(total=len(loader), disable=True) as bar, torch.enable_grad():\n"
        "        for x, y in loader:\n" + BODY
    ),
}


def _program(loop: str, lr: str = "0.1") -> str:
    return PROGRAM.format(lr=lr, loop=loop)


@pytest.mark.parametrize("case", WITHS)
def test_a_sum_around_a_with_is_reduced_after_the_with(case):
    source = _program(WITHS[case])
    compile(source, case, "exec")
    output, findings = migrate_text(source)
    assert output is not None, (case, [f.message for f in findings])
    reduction = (
        "    epoch_loss = accelerator.reduce(torch.tensor(epoch_loss, device=accelerator.device),"
        ' "mean").item()\n    avg_loss = epoch_loss / len(loader)\n'
    )
    assert reduction in output, output
    assert any(f.code == "MIG032" and "even_batches" in f.message for f in findings)


def test_a_read_inside_the_with_after_the_loop_leaves_the_sum_unreduced():
    loop = WITHS["progress bar context"] + "        bar.set_postfix(total=epoch_loss)\n"
    output, findings = migrate_text(_program(loop))
    assert output is None or "epoch_loss = accelerator.reduce(" not in output
    assert any(f.code == "MIG953" for f in findings), [f.message for f in findings]


def test_a_sum_started_inside_the_with_is_reduced_after_the_loop_as_before():
    loop = (
        "    with torch.enable_grad():\n"
        "        epoch_loss = 0\n"
        "        for x, y in loader:\n" + BODY + "        print(epoch_loss / len(loader))\n"
    )
    output, findings = migrate_text(_program(loop))
    assert output is not None, [f.message for f in findings]
    after_loop = (
        "            epoch_loss += loss.item()\n"
        "        epoch_loss = accelerator.reduce(torch.tensor(epoch_loss, device="
        'accelerator.device), "mean").item()\n'
    )
    assert after_loop in output, output


def test_two_processes_step_the_plateau_scheduler_on_the_one_process_average(tmp_path):
    """lr=0: the model never changes; the 8 batches are shared 4 and 4, and the mean of the two
    processes' batch averages is the original's average."""
    source = _program(WITHS["progress bar context"], lr="0.0")
    (tmp_path / "original.py").write_text(source)
    single = subprocess.run([sys.executable, "original.py"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, check=True)  # fmt: skip
    expected = [float(v) for v in re.findall(r"Loss ([\d.]+)", single.stdout)]
    assert len(expected) == 2
    output, _ = migrate_text(source)
    (tmp_path / "migrated.py").write_text(output)
    done = launch(tmp_path / "migrated.py", tmp_path)
    shown = [float(v) for v in re.findall(r"Loss ([\d.]+)", done.stdout)]
    assert len(shown) == 2, done.stdout
    assert all(abs(a - b) < 1e-4 for a, b in zip(shown, expected, strict=True)), (shown, expected)
