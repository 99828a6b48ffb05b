"""A Trainer that copies its constructor's parameters onto itself (`self.amp = amp`) and makes
a tracker in `__init__` that its other methods log to:

- where code before the copy needs the accelerator (`self.device = device`, still read), the
  Accelerator's arguments read the parameter, not the copy (`config.accumulation_steps` for
  `self.steps = config.accumulation_steps`), and it is made at the start of `__init__`;
  where nothing does (`self.device` goes once batches are placed by the loader), it follows
  the copy;
- the driver's `device = "cuda" if ... else "cpu"`, only handed to the Trainer, stays as
  written (the driver cannot see `self.accelerator`; the Trainer no longer reads it);
- `self.writer = SummaryWriter()` goes under `if accelerator.is_main_process:` with every
  statement of every method that calls its methods (otherwise the other processes would meet
  an attribute they never set).
"""

from __future__ import annotations

import re

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

TRAINER = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SummaryWriter:
    def __init__(self):
        self.lines = []

    def add_scalar(self, tag, value, step):
        self.lines.append(f"{tag} {step} {value:.4f}")

    def close(self):
        print("logged", len(self.lines))


class Trainer:
    def __init__(self, device, model, loader, amp=True, epochs=2):
        \"\"\"Train `model` on `loader`.\"\"\"
        self.device = torch.device(device)
        self.model = model.to(device)
        self.amp = amp
        self.epochs = epochs
        self.loader = loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.scaler = torch.cuda.amp.GradScaler(enabled=amp)
        self.writer = SummaryWriter()

    def fit(self):
        for epoch in range(self.epochs):
            total = 0.0
            for inputs, labels in self.loader:
                inputs, labels = inputs.to(self.device), labels.to(self.device)
                self.optimizer.zero_grad()
                with torch.autocast(device_type=self.device.type, enabled=self.amp):
                    loss = nn.functional.cross_entropy(self.model(inputs), labels)
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
                total += loss.item()
            self.writer.add_scalar("loss", total, epoch)
        self.writer.close()


if __name__ == "__main__":
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    Trainer(device, nn.Linear(4, 2), DataLoader(data, batch_size=8)).fit()
"""


def test_the_accelerator_follows_the_copy_when_nothing_before_it_needs_the_accelerator():
    output, findings = migrate_text(TRAINER)
    assert output is not None, [f.message for f in findings]
    init = output[output.index("    def __init__(self, device") : output.index("    def fit")]
    assert init.splitlines()[2:7] == [
        "        self.model = model",
        "        self.amp = amp",
        "        self.accelerator = Accelerator(",
        '            mixed_precision="fp16" if self.amp and amp and torch.cuda.is_available() else "no",',
        "        )",
    ]
    # nothing reads self.device once the batches are placed by the loader: it goes; the
    # driver's own device choice, only handed to the Trainer, stays as written
    assert "self.scaler" not in output and "self.device" not in output
    assert '    device = "cuda" if torch.cuda.is_available() else "cpu"\n' in output


def test_the_tracker_and_every_method_logging_to_it_run_on_the_main_process_only():
    output, _findings = migrate_text(TRAINER)
    assert (
        "        if self.accelerator.is_main_process:\n            self.writer = SummaryWriter()\n"
    ) in output
    assert (
        "            if self.accelerator.is_main_process:\n"
        '                self.writer.add_scalar("loss", total, epoch)\n'
    ) in output
    assert (
        "        if self.accelerator.is_main_process:\n            self.writer.close()\n"
    ) in output


def test_the_migrated_trainer_runs_on_two_processes(tmp_path):
    output, _findings = migrate_text(TRAINER)
    script = tmp_path / "trainer.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # two epochs logged, by the main process only
    assert re.findall(r"^logged (\d+)$", out, re.MULTILINE) == ["2"], out


def test_a_driver_using_its_device_beyond_the_trainer_is_refused_naming_that_line():
    source = TRAINER.replace(
        "    Trainer(device,", "    probe = torch.zeros(1, device=device)\n    Trainer(device,"
    )
    output, findings = migrate_text(source)
    assert output is None
    [refusal] = [f for f in findings if f.needs_human]
    assert refusal.message == (
        "the Accelerator belongs to the Trainer (`self.accelerator`, made in "
        '`Trainer.__init__()`), but `device = "cuda" if torch.cuda.is_available() else "cpu"` '
        "at line 48, outside the class, needs it too; migrate by hand"
    )


ACCUMULATING = """\
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, config, device="cpu"):
        self.model = model
        self.device = device
        self.steps = config.accumulation_steps

    def train(self, loader):
        optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        updates = 0
        for i, (inputs, labels) in enumerate(loader):
            inputs, labels = inputs.to(self.device), labels.to(self.device)
            weight = torch.ones(2, device=self.device)
            loss = nn.functional.cross_entropy(self.model(inputs), labels, weight=weight)
            if self.steps > 1:
                loss = loss / self.steps
            loss.backward()
            if (i + 1) % self.steps == 0:
                optimizer.step()
                optimizer.zero_grad()
                updates += 1
        print("updates", updates)


if __name__ == "__main__":
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    config = SimpleNamespace(accumulation_steps=2)
    Trainer(nn.Linear(4, 2), config).train(DataLoader(data, batch_size=8))
"""


def test_accumulation_steps_copied_after_the_device_are_read_from_the_config_parameter():
    output, findings = migrate_text(ACCUMULATING)
    assert output is not None, [f.message for f in findings]
    assert (
        '    def __init__(self, model, config, device="cpu"):\n'
        "        self.accelerator = Accelerator(\n"
        "            gradient_accumulation_steps=config.accumulation_steps,\n"
        "            cpu=True,\n"  # its device defaults to the CPU, and no call passes another
        "        )\n"
        "        self.model = model\n"
        "        self.device = self.accelerator.device\n"
        "        self.steps = config.accumulation_steps\n"
    ) in output
    # the division goes, and with it the `if` that held only the division
    assert "if self.steps > 1" not in output and "/ self.steps" not in output
    assert "            with self.accelerator.accumulate(self.model):\n" in output


def test_the_accumulating_trainer_runs_on_two_processes(tmp_path):
    output, _findings = migrate_text(ACCUMULATING)
    script = tmp_path / "accumulating.py"
    script.write_text(output)
    out = launch(script, tmp_path).stdout
    # 64 samples, batch 8, two processes: 4 batches each, an update every 2, printed once
    assert re.findall(r"^updates (\d+)$", out, re.MULTILINE) == ["2"], out


def test_with_the_device_still_read_the_accelerator_reads_the_parameter_once():
    source = TRAINER.replace(
        "                    loss = nn.functional.cross_entropy(self.model(inputs), labels)\n",
        "                    weight = torch.ones(2, device=self.device)\n"
        "                    loss = nn.functional.cross_entropy(self.model(inputs), labels, weight)\n",
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    init = output[output.index("    def __init__(self, device") : output.index("    def fit")]
    # `self.amp and amp` (the autocast's and the GradScaler's switches) reads `amp` once
    assert init.splitlines()[2:6] == [
        "        self.accelerator = Accelerator(",
        '            mixed_precision="fp16" if amp and torch.cuda.is_available() else "no",',
        "        )",
        "        self.device = self.accelerator.device",
    ]


def test_a_copy_computed_from_local_copies_of_a_parameter_is_spelt_out_from_the_parameter():
    # `train = config.training` then `self.steps = max(train.accumulation_steps, 1)`, both after
    # `self.device = device`: the Accelerator at the start of __init__ reads what the function
    # could compute there, the local copy spelt out
    source = ACCUMULATING.replace(
        "        self.steps = config.accumulation_steps\n",
        "        train = config.training\n        self.steps = max(train.accumulation_steps, 1)\n",
    ).replace(
        "SimpleNamespace(accumulation_steps=2)",
        "SimpleNamespace(training=SimpleNamespace(accumulation_steps=2))",
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert (
        "        self.accelerator = Accelerator(\n"
        "            gradient_accumulation_steps=max(config.training.accumulation_steps, 1),\n"
        "            cpu=True,\n"
        "        )\n"
        "        self.model = model\n"
    ) in output


def test_a_copy_computed_by_this_files_code_is_not_spelt_out():
    source = ACCUMULATING.replace(
        "        self.steps = config.accumulation_steps\n",
        "        self.steps = steps_of(config)\n",
    ).replace("\n\nclass Trainer:", "\n\ndef steps_of(config):\n    return 2\n\n\nclass Trainer:")
    output, findings = migrate_text(source)
    assert output is None
    [refusal] = [f for f in findings if f.needs_human]
    assert "gradient_accumulation_steps= reads `self.steps`" in refusal.message


def test_a_copy_read_through_self_is_not_moved_before_what_it_reads():
    # `self.steps = self.config.accumulation_steps`: reading it at the start of __init__ would
    # meet no `self.config` yet, so the late Accelerator is refused, naming both lines
    source = ACCUMULATING.replace(
        "        self.steps = config.accumulation_steps\n",
        "        self.config = config\n        self.steps = self.config.accumulation_steps\n",
    )
    output, findings = migrate_text(source)
    assert output is None
    [refusal] = [f for f in findings if f.needs_human]
    assert refusal.message == (
        "the Accelerator's gradient_accumulation_steps= reads `self.steps`, defined at line 13, "
        "but `self.device = device` at line 11 already uses the accelerator; migrate by hand"
    )


AMP_FROM_CONFIG = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, config, device):
        self.model = model.to(device)
        self.device = device
        tcfg = config["training"]
        self.optimizer = torch.optim.SGD(model.parameters(), lr=tcfg["lr"])
        self.use_amp = tcfg["amp"] and torch.cuda.is_available()
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.use_amp)

    def train(self, loader):
        for inputs, labels in loader:
            inputs, labels = inputs.to(self.device), labels.to(self.device)
            self.optimizer.zero_grad()
            with torch.autocast("cuda", enabled=self.use_amp):
                loss = nn.functional.cross_entropy(self.model(inputs), labels)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        print("loss", round(loss.item(), 4) >= 0)


if __name__ == "__main__":
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    config = {"training": {"lr": 0.1, "amp": True}}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    Trainer(nn.Linear(4, 2), config, device).train(DataLoader(data, batch_size=8))
"""


def test_an_amp_switch_computed_from_a_config_copy_reads_the_config_each_condition_once():
    output, findings = migrate_text(AMP_FROM_CONFIG)
    assert output is not None, [f.message for f in findings]
    init = output[output.index("    def __init__") : output.index("    def train")]
    assert init.splitlines()[1:5] == [
        "        self.accelerator = Accelerator(",
        (
            '            mixed_precision="fp16" if config["training"]["amp"] and '
            'torch.cuda.is_available() else "no",'
        ),
        "        )",
        "        self.model = model",
    ]
    assert "GradScaler" not in output and "with self.accelerator.autocast():" in output


def test_the_config_amp_trainer_runs_on_two_processes(tmp_path):
    script = tmp_path / "amp_config.py"
    script.write_text(migrate_text(AMP_FROM_CONFIG)[0])
    assert re.findall(r"^loss (\w+)$", launch(script, tmp_path).stdout, re.MULTILINE) == ["True"]
