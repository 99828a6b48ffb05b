"""A device the entry only places the model on, shows, and hands to the Trainer that owns the
Accelerator needs no accelerator of its own (issue 27, review of 2026-11-27 rule 5): the
Trainer gets `self.accelerator.device` where it uses the device, the entry's variable stays as
written, its placement of the model goes, and a download in the entry runs under the
process-wide state's `main_process_first()`. What the rule must not take: a device the entry
also uses for tensors of its own, a loader the Trainer prepares from what its callers pass
but that the entry then evaluates plain, a mode-switched alias bound before prepare.
Golden fixtures: fixtures/golden/trainer_device_*.in.py; here the other spellings and the
fixtures on 2 processes."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.fixtures import without_batch_note
from tests.golden_runs import verify_golden

TRAINER = """\
import logging
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger(__name__)


class Trainer:
    def __init__(self, model, loader, device):
@KEEP@
        self.loader = loader
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def fit(self):
        for x, y in self.loader:
            x, y = x.to(self.device), y.to(self.device)
            loss = nn.functional.mse_loss(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
@ENTRY@
"""
KEEPS = {
    "kept": "        self.device = device\n        self.model = model.to(device)",
    "built": "        self.device = torch.device(device)\n        self.model = model.to(self.device)",
    "placed_later": "        self.model = model\n        self.device = device\n"
    "        self.model.to(self.device)",
}
ENTRIES = {
    "positional": """\
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 1)
model.to(device)
Trainer(model, loader, device).fit()""",
    "keyword_shown": """\
device = "cuda" if torch.cuda.is_available() else "cpu"
logger.info(f"device: {device}")
print("using", device)
net = nn.Linear(4, 1).to(device)
Trainer(net, loader, device=device).fit()""",
}


@pytest.mark.parametrize("keep", sorted(KEEPS))
@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_the_entrys_device_stays_and_the_trainer_reads_the_accelerators(keep, entry):
    source = TRAINER.replace("@KEEP@", KEEPS[keep]).replace("@ENTRY@", ENTRIES[entry])
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert not [f for f in findings if f.level == "warning"]
    entry_code = output[output.index("loader = DataLoader(") :]
    device_line = ENTRIES[entry].splitlines()[0]
    assert device_line in entry_code  # the entry's choice, as written
    assert "accelerator" not in entry_code
    assert ".to(device)" not in entry_code and "model.to(" not in entry_code
    assert "self.accelerator = Accelerator()" in output
    prepare = output[output.index("= self.accelerator.prepare(") :].split(")")[0]
    assert sorted(prepare.split("(")[1].replace(" ", "").strip().split(",")) == [
        "self.loader",
        "self.model",
        "self.optimizer",
    ]


def test_a_device_the_entry_also_makes_tensors_on_still_refuses():
    source = TRAINER.replace("@KEEP@", KEEPS["kept"]).replace(
        "@ENTRY@",
        ENTRIES["positional"].replace(
            "model.to(device)", "model.to(device)\nprobe = torch.zeros(1, 4, device=device)"
        ),
    )
    output, findings = migrate_text(source)
    assert output is None
    assert any("belongs to the Trainer" in f.message for f in findings)


PLAIN_EVALUATION = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, device):
        self.model = model.to(device)
        self.device = device

    def train(self, train_loader, val_loader):
        optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        for x, y in train_loader:
            x, y = x.to(self.device), y.to(self.device)
            loss = nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(self.evaluate(val_loader))

    def evaluate(self, loader):
        total = 0.0
        with torch.no_grad():
            for x, y in loader:
                x, y = x.to(self.device), y.to(self.device)
                total += nn.functional.mse_loss(self.model(x), y, reduction="sum").item()
        return total


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
train_loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
val_loader = DataLoader(TensorDataset(torch.randn(16, 3), torch.randn(16, 1)), batch_size=4)
trainer = Trainer(nn.Linear(3, 1), device)
trainer.train(train_loader, val_loader)
print("final", trainer.evaluate(val_loader))
"""


def test_a_loader_prepared_from_a_parameter_but_evaluated_plain_by_the_entry_stays_plain():
    """`evaluate()` is handed `val_loader` by `train()` and by the entry: preparing it in
    `train()` alone would leave the entry's call on a plain loader beside prepared ones (was a
    MIG900 refusal). The training is migrated and every evaluation stays plain, with a note
    naming the call (h12 review: a NER Trainer evaluated its test set from the entry)."""
    output, findings = migrate_text(PLAIN_EVALUATION)
    assert output is not None, [f.message for f in findings]
    assert "self.model, optimizer, train_loader = self.accelerator.prepare(" in output
    assert "val_loader = self.accelerator.prepare" not in output
    assert "                x, y = x.to(self.device), y.to(self.device)\n" in output
    [note] = [f for f in findings if "`val_loader`, which the loop" in f.message]
    assert note.code == "MIG006" and not note.needs_human
    assert "also handed a loader no code here prepares (the call at line " in note.message
    assert "every process runs the whole set" in note.message


MODE_ALIAS = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def flatten(x):
    return x.reshape(len(x), -1)


class Trainer:
    def __init__(self, model, optimizer, loader, transform_fn=flatten):
        self.model = model
        self.optimizer = optimizer
        self.loader = loader
        self.transform_fn = transform_fn

    def train_epoch(self):
        model = self.model.train()
        optimizer = self.optimizer
        loader = self.loader
        for x, y in loader:
            x = self.transform_fn(x)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 2, 2), torch.randn(16, 1)), batch_size=4)
Trainer(model, optimizer, loader, transform_fn=flatten).train_epoch()
"""


def test_a_mode_switched_alias_is_the_model_and_is_not_bound_before_prepare():
    output, findings = migrate_text(MODE_ALIAS)
    # the model is `self.model` (the alias switches its mode), never the function handed in;
    # its alias is bound before the loaders, so no prepare can come first: refused, not run
    # on the plain model
    assert output is None
    refusal = next(f for f in findings if f.code == "MIG900")
    assert "`self.model` used at line 18 (`.train()` called)" in refusal.message


# -- the golden fixtures on 2 processes ------------------------------------------------------


@pytest.mark.slow
def test_a_trainer_handed_the_entrys_device_trains_as_the_original(tmp_path):
    report = verify_golden(tmp_path, "trainer_device_from_the_entry")
    assert len(report["steps"]) == 24  # 96 samples, batch 12, 3 epochs


@pytest.mark.slow
def test_a_download_in_the_entry_and_a_device_text_train_as_the_original(tmp_path):
    report = verify_golden(tmp_path, "trainer_device_text_and_download")
    assert len(report["steps"]) == 30  # 80 samples, batch 8, 3 epochs


HISTORY = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.history = {"acc": []}

    def fit(self):
        for epoch in range(2):
            correct = 0
            for x, y in self.loader:
                out = self.model(x)
                loss = torch.nn.functional.cross_entropy(out, y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                correct += (out.argmax(1) == y).float().mean().item()
            self.history["acc"].append(correct)
            print(f"epoch {epoch}: {self.history['acc'][-1]:.3f}")


loader = DataLoader(TensorDataset(torch.randn(16, 2), torch.randint(0, 2, (16,))), batch_size=4)
Trainer(torch.nn.Linear(2, 2), loader).fit()
"""


def test_a_number_kept_in_a_dict_of_lists_is_still_this_processs_own():
    # `self.history["acc"].append(correct)` holds what is put in it: shown, a truthful note
    output, findings = migrate_text(
        HISTORY.replace("            correct = 0\n", "            correct = [0]\n")
        .replace("correct +=", "correct[0] +=")
        .replace("append(correct)", "append(correct[0])")
    )
    assert output is not None
    # (MIG006: `__init__` keeps the model and loader its caller passes in)
    assert [f.code for f in without_batch_note(findings)] == ["MIG006", "MIG953"]
