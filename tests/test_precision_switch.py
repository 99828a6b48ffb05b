"""Where mixed precision is switched (MIG020's `enabled=`): an expression of the owner's own
values becomes part of the Accelerator's `mixed_precision=` condition (golden
amp_compound_switch, run on 2 processes); a value the Accelerator cannot be given where it is
made (a helper's parameter no call passes, a dtype chosen at run time) is a MIG900 that names
the value, its line and where it comes from."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, ROOT

LOOP = """\
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16, enabled={switch}):
        loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
HEAD = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""


@pytest.mark.parametrize(
    ("switch", "condition"),
    [
        ("amp and not cpu_only", "amp and not cpu_only and torch.cuda.is_available()"),
        ("amp or force_half", "(amp or force_half) and torch.cuda.is_available()"),
        ('precision == "fp16"', 'precision == "fp16" and torch.cuda.is_available()'),
    ],
)
def test_a_switch_of_the_owners_own_values_joins_the_accelerator_condition(switch, condition):
    values = 'amp, cpu_only, force_half, precision = True, False, False, "fp16"\n'
    output, findings = migrate_text(values + HEAD + LOOP.format(switch=switch))
    assert findings == []
    assert f'mixed_precision="fp16" if {condition} else "no"' in output
    # made after the values it reads
    assert output.index("amp, cpu_only") < output.index("accelerator = Accelerator(")
    assert "torch.autocast" not in output and "with accelerator.autocast():" in output


def test_a_switch_read_from_a_loop_is_not_carried_over():
    body = "".join(f"    {line}\n" for line in LOOP.format(switch="epoch > 0").splitlines())
    output, findings = migrate_text(HEAD + "for epoch in range(2):\n" + body)
    assert output is None
    assert "`enabled=epoch > 0` at line 8" in findings[0].message


def test_a_switch_that_calls_something_is_not_carried_over():
    output, findings = migrate_text("amp = True\n" + HEAD + LOOP.format(switch="bool(amp)"))
    assert output is None
    assert "`enabled=bool(amp)` at line 8" in findings[0].message


HELPER = """\
import torch


def train_epoch(model, loader, optimizer, device, scaler):
    model.train()
    for x, y in loader:
        x = x.to(device)
        with torch.autocast("cuda", dtype=torch.float16, enabled=scaler.is_enabled()):
            loss = model(x).sum()
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""


def test_a_scaler_this_file_does_not_make_is_named_not_scaled_twice():
    output, findings = migrate_text(HELPER)
    assert output is None
    message = next(f.message for f in findings if f.code == "MIG900")
    assert "`scaler.scale(loss).backward()` at line 11 scales with a GradScaler" in message
    assert "`scaler` is a parameter in `train_epoch()` (line 4) and no call" in message
    made = (
        HEAD
        + "scaler = torch.cuda.amp.GradScaler() if FLAG else None\n"
        + LOOP.format(switch="FLAG").replace("loss.backward()", "scaler.scale(loss).backward()")
    )
    output, findings = migrate_text(made)
    assert output is None
    assert "`scaler` is set at line 6 to `torch.cuda.amp.GradScaler() if FLAG else None`" in (
        findings[-1].message
    )


def test_a_switch_that_is_the_owning_functions_parameter_is_read_there():
    source = HELPER.replace("device, scaler", "device, use_amp").replace(
        "    model.train()\n",
        "    model.train()\n    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)\n",
    )
    output, findings = migrate_text(source.replace("scaler.is_enabled()", "use_amp"))
    assert [f.code for f in findings] == ["MIG006"]  # prepares what its callers pass
    accelerator = 'Accelerator(\n        mixed_precision="fp16" if use_amp and torch.cuda'
    assert accelerator in output and "scaler" not in output


def test_a_dtype_chosen_at_run_time_is_named():
    source = HEAD + 'half = {"fp16": torch.float16}["fp16"]\n' + LOOP.format(switch="True")
    output, findings = migrate_text(source.replace("dtype=torch.float16", "dtype=half"))
    assert output is None
    assert "the autocast dtype `half` at line 8 is chosen at run time" in findings[0].message


@pytest.mark.slow
def test_compound_switch_fixture_runs_on_two_processes(tmp_path):
    output = (GOLDEN / "amp_compound_switch.out.py").read_text()
    assert migrate_text((GOLDEN / "amp_compound_switch.in.py").read_text())[0] == output
    script = tmp_path / "amp.py"
    script.write_text(output)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", str(script), "--amp"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("epoch 1 loss") == 1  # two epochs, printed by the main process
