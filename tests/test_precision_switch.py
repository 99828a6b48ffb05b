"""Where mixed precision is switched (MIG020's `enabled=`): an expression of the owner's own
values becomes part of the Accelerator's `mixed_precision=` condition (golden
amp_compound_switch, run on 2 processes); a value the Accelerator cannot be given where it is
made (a dtype chosen at run time) is a MIG900 that names the value, its line and where it comes
from. A GradScaler the file does not make (a helper's parameter) is kept with its autocast, run
through an unmigrated driver on 2 processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, ROOT, without_batch_note

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
    scaled = LOOP.format(switch=switch).replace(  # fp16 with its GradScaler (else kept as is)
        "    loss.backward()\n    optimizer.step()\n",
        "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n",
    )
    head = HEAD + f"scaler = torch.cuda.amp.GradScaler(enabled={switch})\n"
    output, findings = migrate_text(values + head + scaled)
    assert without_batch_note(findings) == []
    assert f'mixed_precision="fp16" if {condition} else "no"' in output
    # made after the values it reads
    assert output.index("amp, cpu_only") < output.index("accelerator = Accelerator(")
    assert "torch.autocast" not in output and "with accelerator.autocast():" in output


KEPT = "is kept as written (whether it is on is decided where the Accelerator cannot read it)"


def test_a_switch_read_from_a_loop_keeps_the_script_s_own_autocast():
    body = "".join(f"    {line}\n" for line in LOOP.format(switch="epoch > 0").splitlines())
    output, findings = migrate_text(HEAD + "for epoch in range(2):\n" + body)
    assert output is not None and "enabled=epoch > 0" in output
    assert "mixed_precision" not in output and "accelerator.backward(loss)" in output
    findings = without_batch_note(findings)
    assert [f.code for f in findings] == ["MIG020"] and KEPT in findings[0].message


def test_a_switch_that_calls_something_keeps_the_script_s_own_autocast():
    output, findings = migrate_text("amp = True\n" + HEAD + LOOP.format(switch="bool(amp)"))
    assert output is not None and "enabled=bool(amp)" in output
    assert "mixed_precision" not in output
    assert KEPT in without_batch_note(findings)[0].message


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


def test_a_scaler_this_file_does_not_make_is_kept_with_its_autocast():
    """The caller's GradScaler cannot go: the script's own autocast and scaler stay, the
    backward goes through the accelerator, and the Accelerator gets no mixed_precision= (its
    own scaler would scale a second time)."""
    output, findings = migrate_text(HELPER)
    findings = without_batch_note(findings)
    assert [f.code for f in findings] == ["MIG006", "MIG020"]
    note = findings[1]
    assert note.level == "note"
    assert "`scaler.scale(...)` at line 11 scales with a GradScaler" in note.message
    assert "`scaler` is a parameter in `train_epoch()` (line 4) and no call" in note.message
    assert "kept as written" in note.message
    assert "    accelerator = Accelerator()\n" in output
    assert "mixed_precision" not in output
    kept = (
        '        with torch.autocast("cuda", dtype=torch.float16, enabled=scaler.is_enabled()):\n'
        "            loss = model(x).sum()\n"
        "        optimizer.zero_grad()\n"
        "        accelerator.backward(scaler.scale(loss))\n"
        "        scaler.step(optimizer)\n"
        "        scaler.update()\n"
    )
    assert output.endswith(kept)
    made = (
        HEAD
        + "scaler = torch.cuda.amp.GradScaler() if FLAG else None\n"
        + LOOP.format(switch="FLAG").replace("loss.backward()", "scaler.scale(loss).backward()")
    )
    output, findings = migrate_text(made)
    assert "`scaler` is set at line 6 to `torch.cuda.amp.GradScaler() if FLAG else None`" in (
        next(f.message for f in findings if f.code == "MIG020")
    )
    assert "accelerator.backward(scaler.scale(loss))" in output
    assert "scaler = torch.cuda.amp.GradScaler() if FLAG else None" in output
    assert "mixed_precision" not in output


def test_a_switch_that_is_the_owning_functions_parameter_is_read_there():
    source = HELPER.replace("device, scaler", "device, use_amp").replace(
        "    model.train()\n",
        "    model.train()\n    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)\n",
    )
    output, findings = migrate_text(source.replace("scaler.is_enabled()", "use_amp"))
    # prepares what its callers pass
    assert [f.code for f in without_batch_note(findings)] == ["MIG006"]
    accelerator = 'Accelerator(\n        mixed_precision="fp16" if use_amp and torch.cuda'
    assert accelerator in output and "scaler" not in output


def test_a_dtype_chosen_at_run_time_keeps_the_script_s_own_autocast():
    source = HEAD + 'half = {"fp16": torch.float16}["fp16"]\n' + LOOP.format(switch="True")
    output, findings = migrate_text(source.replace("dtype=torch.float16", "dtype=half"))
    assert output is not None and "dtype=half" in output and "mixed_precision" not in output
    kept = without_batch_note(findings)[0]
    assert "is kept as written (its dtype is chosen at run time)" in kept.message


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


CALLER_SCALER_TRAINER = """\
import torch


def train_epoch(model, loader, optimizer, scaler):
    model.train()
    batches = 0
    for x, y in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=scaler.is_enabled()):
            loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        batches += 1
    return batches
"""
CALLER_SCALER_DRIVER = """\
import os
import re

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import train_epoch

torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
loader = DataLoader(data, batch_size=4, shuffle=True)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
for epoch in range(2):
    batches = train_epoch(model, loader, optimizer, scaler)
rank = os.environ.get("RANK", "0")
weights = [round(v, 6) for v in model.weight.detach().flatten().tolist()]
print(f"rank {rank} batches {batches} scale {scaler.get_scale()} weights {weights}", flush=True)
"""


@pytest.mark.slow
def test_a_trainer_kept_on_its_callers_scaler_runs_through_its_unmigrated_driver(tmp_path):
    """The trainer is migrated, its driver is not: on 2 processes each rank draws half the
    batches, the caller's scaler still scales, and both ranks end with the same weights (the
    backward went through the prepared, synchronised model)."""
    output, _findings = migrate_text(CALLER_SCALER_TRAINER)
    assert "accelerator.backward(scaler.scale(loss))" in output
    (tmp_path / "trainer.py").write_text(output)
    (tmp_path / "driver.py").write_text(CALLER_SCALER_DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "driver.py"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = sorted(re.findall(r"rank \d batches \d+ scale [\d.]+ weights \[[^\]]*\]", done.stdout))
    assert [line.split(" batches")[0] for line in lines] == ["rank 0", "rank 1"]
    assert all(" batches 4 scale 1024.0 " in line for line in lines)  # 8 batches, half each
    assert lines[0].split("weights")[1] == lines[1].split("weights")[1]


CHOSEN_STEP = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def amp_step(model, optimizer, scaler, x, y):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()


def plain_step(model, optimizer, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def train_one_epoch(model, loader, optimizer, scaler=None):
    for x, y in loader:
        if scaler is not None:
            amp_step(model, optimizer, scaler, x, y)
        else:
            plain_step(model, optimizer, x, y)


model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cuda.amp.GradScaler()
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
train_one_epoch(model, loader, optimizer, scaler)
"""


def test_a_scaler_that_chooses_the_step_is_kept_with_its_autocast():
    """`if scaler is not None:` picks the mixed-precision step: the scaler is more than its
    dance, so it stays, with its autocast; both backwards go through the accelerator."""
    output, findings = migrate_text(CHOSEN_STEP)
    notes = [f for f in findings if f.code == "MIG020"]
    assert [f.level for f in notes] == ["note"]
    assert notes[0].message.startswith("GradScaler `scaler` (line 31) is used beyond")
    assert "    accelerator.backward(scaler.scale(loss))\n    scaler.step(optimizer)\n" in output
    assert "    accelerator.backward(loss)\n" in output
    assert 'with torch.autocast("cuda", dtype=torch.float16):' in output
    assert "scaler = torch.cuda.amp.GradScaler()" in output
    assert "mixed_precision" not in output
