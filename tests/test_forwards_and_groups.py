"""A forward is a forward, and parameter groups train their model (issue 27, review of
2026-11-27 rules 2 and 3): `model.train().forward(x)`, `model.eval()(x)` and a forward reached
through a base class's stub that several trainers override are the model's forward; an
optimizer built on parameter groups from `model.named_parameters()` (through names,
comprehensions, an inline list, a method of the Trainer that returns it) trains that model,
and a model re-bound by a wrapper keeps its role. Apex AMP, which swaps the optimizer, is
refused with its own reason. Golden fixtures: fixtures/golden/forward_*.in.py and
parameter_groups_*.in.py; here the other spellings and the fixtures on 2 processes."""

from __future__ import annotations

import textwrap

import pytest

from migrator.engine import migrate_text
from tests.fixtures import without_batch_note
from tests.golden_runs import launch_in_turn, verify_golden

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
model = nn.DataParallel(nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 1)))
@OPTIMIZER@
for x, y in loader:
    out = @FORWARD@
    loss = nn.functional.mse_loss(out, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.module.renormalize()
"""
PLAIN = "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)"


def _script(forward: str, optimizer: str = PLAIN) -> str:
    return SCRIPT.replace("@FORWARD@", forward).replace("@OPTIMIZER@", optimizer)


@pytest.mark.parametrize(
    "forward",
    [
        "model.train().forward(x)",
        "model.train()(x)",
        "model.forward(x)",
        "model.float().train(True).forward(x)",
    ],
)
def test_a_forward_chained_on_mode_calls_is_the_models_forward(forward):
    output, findings = migrate_text(_script(forward))
    assert [f.code for f in without_batch_note(findings)] == ["MIG901"], findings
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output
    assert f"out = {forward}" in output


def test_a_model_run_only_through_a_method_still_refuses():
    output, findings = migrate_text(_script("model.module.predict(x)"))
    assert output is None
    assert any(f.code == "MIG900" and "never its forward" in f.message for f in findings)


GROUPS = {
    "names": """\
param_optimizer = list(model.named_parameters())
no_decay = ["bias"]
groups = [
    {"params": [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)]},
    {"params": [p for n, p in param_optimizer if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
]
optimizer = torch.optim.AdamW(groups, lr=1e-3)""",
    "inline": """\
named = dict(model.named_parameters())
weights = [p for n, p in named.items() if n.endswith("weight")]
biases = [p for n, p in named.items() if n.endswith("bias")]
optimizer = torch.optim.SGD([{"params": weights}, {"params": biases, "lr": 0.01}], lr=0.1)""",
    "dict_calls": """\
base = list(model.named_parameters())
optimizer = torch.optim.SGD(
    [dict(params=[p for _, p in base if p.ndim > 1]), dict(params=[p for _, p in base if p.ndim == 1])],
    lr=0.1,
)""",
    "keyword": """\
trainable = [p for p in model.parameters() if p.requires_grad]
optimizer = torch.optim.Adam(params=trainable, lr=1e-3)""",
    "factory": """\
def make_optimizer(net, lr):
    if lr > 1:
        raise ValueError(lr)
    return torch.optim.Adam(net.parameters(), lr=lr) if lr < 0.01 else torch.optim.SGD(
        net.parameters(), lr=lr
    )


optimizer = make_optimizer(model, 0.1)""",
}


@pytest.mark.parametrize("spelling", sorted(GROUPS))
def test_parameter_groups_of_the_model_train_it(spelling):
    output, findings = migrate_text(_script("model(x)", GROUPS[spelling]))
    assert [f.code for f in without_batch_note(findings)] == ["MIG901"], findings
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output


def test_groups_holding_parts_of_a_model_through_a_name_still_refuse():
    groups = (
        "head = list(model.module[2].parameters())\n"
        "optimizer = torch.optim.SGD([{'params': head}], lr=0.1)"
    )
    output, findings = migrate_text(_script("model(x)", groups))
    assert output is None
    assert any("parts of models" in f.message for f in findings)


def test_apex_amp_is_refused_with_its_own_reason():
    script = _script("model(x)").replace(
        PLAIN,
        PLAIN + "\nfrom apex import amp\nmodel, optimizer = amp.initialize(model, optimizer)",
    )
    output, findings = migrate_text(script)
    assert output is None
    refusal = [f for f in findings if f.code == "MIG900"]
    assert len(refusal) == 1 and refusal[0].level == "warning"
    assert "Apex" in refusal[0].message and "mixed_precision" in refusal[0].message


TRAINERS = '''\
import torch
import torch.nn as nn


class Base:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.optimizer = self.make_optimizer()

    def make_optimizer(self):
        return torch.optim.SGD(self.model.parameters(), lr=0.1)

    def loss_of(self, batch):
        """Each trainer says."""

    def fit(self):
        for batch in self.loader:
            self.optimizer.zero_grad()
            loss = self.loss_of(batch)
            loss.backward()
            self.optimizer.step()
            self.model.@METHOD@()


class A(Base):
    def loss_of(self, batch):
        x, y = batch
        return nn.functional.mse_loss(@FORWARD@, y)


class B(Base):
    def loss_of(self, batch):
        x, y = batch
        return nn.functional.l1_loss(self.model(x), y)
'''


@pytest.mark.parametrize("forward", ["self.model(x)", "self.model.forward(x)"])
def test_a_forward_in_any_override_of_a_stub_trains_the_model(forward):
    source = TRAINERS.replace("@FORWARD@", forward).replace("@METHOD@", "regularize")
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert "self.model, self.optimizer, self.loader = self.accelerator.prepare(" in output


# -- the golden fixtures on 2 processes ------------------------------------------------------

FIXTURES = [
    "forward_chained_on_train_mode",
    "forward_through_a_loss_method",
    "parameter_groups_from_named_parameters",
    "parameter_groups_literal_of_names",
]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    return launch_in_turn(tmp_path_factory.mktemp("forwards"), FIXTURES)


@pytest.mark.slow
def test_a_detector_trained_through_train_forward_learns_on_two_processes(launched):
    out = launched["forward_chained_on_train_mode"]
    # 64 samples, batch 8, two processes: 4 steps an epoch, `describe()` every 4th step
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("step ")] == [
        "step 4",
        "step 8",
    ]
    losses = [float(line.split()[-1]) for line in out.splitlines() if "val loss" in line]
    assert len(losses) == 2 and losses[1] < losses[0], out


@pytest.mark.slow
def test_each_trainer_fixture_trains_on_two_processes(launched):
    for name in FIXTURES[1:]:
        lines = [line for line in launched[name].splitlines() if line.startswith("epoch ")]
        assert len(lines) >= 2, launched[name]


@pytest.mark.slow
def test_a_loss_method_trainer_prints_the_original_numbers(tmp_path):
    report = verify_golden(tmp_path, "forward_through_a_loss_method")
    assert len(report["steps"]) == 24  # 96 samples, batch 12, 3 epochs


@pytest.mark.slow
def test_weight_decay_groups_train_as_the_original(tmp_path):
    report = verify_golden(tmp_path, "parameter_groups_from_named_parameters")
    assert len(report["steps"]) == 36  # 120 samples, batch 10, 3 epochs


def test_scripts_parse():
    for spelling in GROUPS.values():
        compile(_script("model(x)", textwrap.dedent(spelling)), "<script>", "exec")


SAVES = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from PIL import Image

loader = DataLoader(TensorDataset(torch.randn(16, 2), torch.randn(16, 1)), batch_size=4)
model = torch.nn.DataParallel(torch.nn.Linear(2, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model.train().forward(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
@SAVE@
"""


def test_a_save_method_statement_runs_on_the_main_process():
    output, findings = migrate_text(
        SAVES.replace("@SAVE@", '    Image.new("L", (4, 4)).save(f"{epoch}.png")')
    )
    assert output is not None, [f.message for f in findings]
    assert '    if accelerator.is_main_process:\n        Image.new("L", (4, 4)).save(' in output


def test_a_save_method_whose_result_is_read_is_refused_with_the_write():
    # a model's own checkpoint method (easy-faster-rcnn's `model.module.save(dir, step, ...)`)
    # whose returned path the next line logs: it cannot simply go under the main process
    save = '    path = model.module.save("ckpt", epoch, optimizer)\n    print(path)'
    output, findings = migrate_text(SAVES.replace("@SAVE@", save))
    assert output is None
    refusal = next(f for f in findings if f.code == "MIG952")
    assert "accelerator.unwrap_model(model).save(...)" in refusal.message
