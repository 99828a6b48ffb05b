"""MIG032 on sums shown and restarted every few passes (PyTorch's CIFAR tutorial: `if i % 2000 ==
1999: print(running_loss / 2000); running_loss = 0.0`), and on a loss kept to show by a meter
or a progress bar: the window's sum is reduced over the processes where it is first read
inside that `if`, when every process reaches the `if` alike; a loss kept by `meter.update` or
`bar.set_postfix` is the mean over the processes, unless the call also keeps a count of this
process's own. Also: a loader drawn through `itertools.cycle` is prepared like any other."""

from __future__ import annotations

import re
import subprocess
import sys

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

TUTORIAL = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
trainset = TensorDataset(torch.randn(96, 4), torch.randint(0, 3, (96,)))
trainloader = DataLoader(trainset, batch_size=8, shuffle=False)
net = torch.nn.Linear(4, 3)
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr={lr})
for epoch in range(2):
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        inputs, labels = data
        optimizer.zero_grad()
        loss = criterion(net(inputs), labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        if {test}:
            print(f"[{{epoch + 1}}, {{i + 1:3d}}] loss: {{running_loss / 4:.6f}}")
            running_loss = 0.0
"""

WINDOW_REDUCED = (
    "        if i % 4 == 3:\n"
    "            running_loss = accelerator.reduce(torch.tensor(running_loss, "
    'device=accelerator.device), "mean").item()\n'
    "            accelerator.print("
)


def _migrate(source: str) -> tuple[str, list[str]]:
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    return output, [f.code for f in findings]


def test_the_tutorials_windowed_loss_is_reduced_before_it_is_shown():
    output, codes = _migrate(TUTORIAL.format(lr="0.01", test="i % 4 == 3"))
    assert WINDOW_REDUCED in output
    assert "MIG953" not in codes


def test_a_window_whose_test_is_this_processs_own_keeps_its_sum_with_a_note():
    # `running_loss > 1.0` differs per process: a reduce inside would wait forever
    output, codes = _migrate(TUTORIAL.format(lr="0.01", test="running_loss > 1.0"))
    assert "running_loss = accelerator.reduce(" not in output
    assert "MIG953" in codes


def test_a_window_sum_also_read_after_the_loop_is_left_with_a_note():
    source = TUTORIAL.format(lr="0.01", test="i % 4 == 3") + "    print('left', running_loss)\n"
    output, codes = _migrate(source)
    assert "running_loss = accelerator.reduce(" not in output
    assert "MIG953" in codes


def test_a_window_of_sample_sums_and_counts_is_summed():
    # restarted together (`running_loss, seen = 0.0, 0`) or one by one
    tuple_reset = "            running_loss, seen = 0.0, 0\n"
    for reset in (tuple_reset, "            running_loss = 0.0\n            seen = 0\n"):
        _check_sample_window(reset)


def _check_sample_window(reset: str) -> None:
    source = (
        TUTORIAL.format(lr="0.01", test="i % 4 == 3")
        .replace("    running_loss = 0.0\n    for", "    running_loss, seen = 0.0, 0\n    for")
        .replace(
            "        running_loss += loss.item()\n",
            "        running_loss += loss.item() * inputs.size(0)\n"
            "        seen += inputs.size(0)\n",
        )
        .replace("running_loss / 4:", "running_loss / seen:")
        .replace("            running_loss = 0.0\n", reset)
    )
    output, codes = _migrate(source)
    for name in ("running_loss", "seen"):
        assert (
            f"            {name} = accelerator.reduce(torch.tensor({name}, "
            f'device=accelerator.device), "sum").item()\n'
        ) in output, output
    assert "MIG953" not in codes


def _windows(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"loss: ([\d.]+)$", text, re.MULTILINE)]


def test_two_processes_with_split_batches_show_the_one_process_windows(tmp_path, monkeypatch):
    # lr=0: the model never changes; split batches give each process half of each batch of
    # 8, so the mean of the two halves' losses is the batch's, window by window
    source = TUTORIAL.format(lr="0.0", test="i % 4 == 3")
    (tmp_path / "original.py").write_text(source)
    single = subprocess.run([sys.executable, "original.py"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, check=True)  # fmt: skip
    expected = _windows(single.stdout)
    assert len(expected) == 6  # 12 batches, a window of 4, two epochs
    (tmp_path / "migrated.py").write_text(_migrate(source)[0])
    monkeypatch.setenv("MIGRATE_SPLIT_BATCHES", "1")
    shown = _windows(launch(tmp_path / "migrated.py", tmp_path).stdout)
    assert len(shown) == len(expected)
    assert all(abs(a - b) < 1e-5 for a, b in zip(shown, expected, strict=True)), (shown, expected)


CYCLED = """\
import itertools

import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(80, 4), torch.randn(80, 1)), batch_size=8,
                    shuffle=True, drop_last=True)
model = torch.nn.Linear(4, 1)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
batches = {wrapped}
running = 0.0
for step in range(1, 41):
    x, y = next(batches)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    running += loss.item()
    if step % 10 == 0:
        print(f"step {{step}} loss {{running / 10:.4f}}")
        running = 0.0
"""


def test_a_loader_drawn_through_itertools_cycle_is_prepared():
    for wrapped in ("itertools.cycle(loader)", "iter(loader)"):
        output, codes = _migrate(CYCLED.format(wrapped=wrapped))
        assert "model, opt, loader = accelerator.prepare(model, opt, loader)" in output, wrapped
        assert "MIG905" not in codes  # not a loop without a loader
        assert "    running = accelerator.reduce(" in output, wrapped


def test_a_cycle_imported_by_name_is_itertools_cycle():
    source = CYCLED.format(wrapped="cycle(loader)").replace(
        "import itertools\n", "from itertools import cycle\n"
    )
    output, _ = _migrate(source)
    assert "model, opt, loader = accelerator.prepare(model, opt, loader)" in output


METERS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm


class Meter:
    def __init__(self):
        self.values = []

    def update(self, value, n=1):
        self.values += [value] * n

    def mean(self):
        return sum(self.values) / len(self.values)


loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    meter = Meter()
    bar = tqdm(loader)
    for x, y in bar:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        meter.update({kept})
        bar.set_postfix(loss=loss.item())
    print(epoch, meter.mean())
"""
REDUCED_LOSS = 'accelerator.reduce(loss.detach(), "mean").item()'


def test_a_loss_a_meter_or_a_progress_bar_keeps_is_the_mean_over_the_processes():
    output, codes = _migrate(METERS.format(kept="loss.item()"))
    assert f"meter.update({REDUCED_LOSS})" in output
    assert f"bar.set_postfix(loss={REDUCED_LOSS})" in output
    assert "MIG953" not in codes


def test_a_meter_also_given_this_processs_count_keeps_its_loss_with_a_note():
    # the count is this process's: reducing the loss alone would not make the meter whole
    output, codes = _migrate(METERS.format(kept="loss.item(), x.size(0)"))
    assert "meter.update(loss.item(), x.size(0))" in output
    assert "MIG953" in codes


def test_a_window_divided_by_its_named_period_is_a_mean_of_batch_losses():
    """`if step % cfg.log_every == 0: print(running / cfg.log_every)`: the divisor is the
    window's period, its count of batches on each process, however it is spelled (h12 review:
    a DDPM script's loss was summed over the processes, N times too high)."""
    for period, setup in (
        ("cfg.log_every", "class cfg:\n    log_every = 4\n"),
        ("LOG_EVERY", "LOG_EVERY = 4\n"),
        ("args.print_freq", "import argparse\nargs = argparse.Namespace(print_freq=4)\n"),
    ):
        source = setup + TUTORIAL.format(lr="0.01", test=f"(i + 1) % {period} == 0").replace(
            "running_loss / 4", f"running_loss / {period}"
        )
        output, _codes = _migrate(source)
        assert (
            "running_loss = accelerator.reduce(torch.tensor(running_loss, "
            'device=accelerator.device), "mean").item()'
        ) in output, period
