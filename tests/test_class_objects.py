"""A class's training objects made in different methods (issue 16): what is prepared where,
and the MIG900 findings where no safe place exists. The reviewed goldens
(fixtures/golden/class_objects_*) and their two-process runs are in test_idioms_objects.py."""

from __future__ import annotations

import textwrap

from migrator.engine import migrate_text
from tests.fixtures import without_batch_note

HEADER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
"""


def migrate(body: str):
    return migrate_text(HEADER + textwrap.dedent(body))


def lines_of(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines()]


def warnings(findings) -> list[str]:
    return [f.message for f in findings if f.level == "warning"]


def test_model_and_optimizer_prepared_once_in_init_and_the_loader_each_epoch():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def epoch(self, dataset):
                loader = DataLoader(dataset, batch_size=4)
                for x, y in loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.opt.step()
    """)
    assert not warnings(findings)
    lines = lines_of(output)
    init = lines.index("def __init__(self, model):")
    epoch = lines.index("def epoch(self, dataset):")
    prepare_model = lines.index(
        "self.model, self.opt = self.accelerator.prepare(self.model, self.opt)"
    )
    prepare_loader = lines.index("loader = self.accelerator.prepare(loader)")
    assert lines[init + 1] == "self.accelerator = Accelerator()"
    assert init < prepare_model < epoch < prepare_loader
    assert output.count(".prepare(") == 2  # the model is not prepared again each epoch


def test_placeholder_in_init_is_not_where_the_optimizer_is_made():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, model, data):
                self.model = model
                self.data = data
                self.optimizer = None

            def run(self):
                model = self.model
                self.optimizer = torch.optim.AdamW(model.parameters())
                loader = DataLoader(self.data, batch_size=4)
                for x, y in loader:
                    nn.functional.mse_loss(model(x), y).backward()
                    self.optimizer.step()
                    self.optimizer.zero_grad()
    """)
    assert not warnings(findings)
    assert "model, self.optimizer, loader = self.accelerator.prepare(" in output
    assert output.count(".prepare(") == 1


def test_optimizer_made_under_a_condition_in_its_method_is_prepared_in_its_branch():
    """Made only when `kind == "sgd"`: prepared right there, so a path that never makes it
    never prepares it (the original failed at its first use then, and so does the result);
    the model it trains is prepared at the method's top level (home_placement.py)."""
    output, findings = migrate("""
        class Trainer:
            def __init__(self, model, data, loader):
                self.model = model
                self.loader = loader

            def setup(self, kind):
                if kind == "sgd":
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def fit(self):
                for x, y in self.loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.opt.step()
    """)
    assert not warnings(findings), warnings(findings)
    lines = lines_of(output)
    setup = lines.index("def setup(self, kind):")
    assert lines[setup + 1 : setup + 6] == [
        "self.model = self.accelerator.prepare(self.model)",
        'if kind == "sgd":',
        "self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)",
        "",
        "self.opt = self.accelerator.prepare(self.opt)",
    ]


def test_every_branch_making_the_optimizer_or_raising_is_enough():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, model, loader):
                self.model = model
                self.loader = loader

            def setup(self, kind):
                if kind == "sgd":
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
                elif kind == "adam":
                    self.opt = torch.optim.Adam(self.model.parameters())
                else:
                    raise ValueError(kind)

            def fit(self):
                for x, y in self.loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.opt.step()
    """)
    assert not warnings(findings)
    lines = lines_of(output)
    raised = lines.index("raise ValueError(kind)")
    assert (
        lines[raised + 1 :].index(
            "self.model, self.opt = self.accelerator.prepare(self.model, self.opt)"
        )
        < 3
    )
    assert "self.loader = self.accelerator.prepare(self.loader)" in lines


def test_module_training_itself_is_refused_naming_the_method():
    output, findings = migrate("""
        class Classifier(nn.Module):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone
                self.head = nn.Linear(8, 1)

            def forward(self, x):
                return self.head(self.backbone(x))

            def fit(self, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    nn.functional.mse_loss(self.forward(x), y).backward()
                    optimizer.step()
    """)
    assert output is None
    assert any("`Classifier.fit()`" in m and "nn.Module it trains" in m
               for m in warnings(findings)), warnings(findings)  # fmt: skip


def test_class_without_init_preparing_in_two_methods_is_refused():
    output, findings = migrate("""
        class Trainer:
            def build(self, model):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

            def fit(self, dataset):
                loader = DataLoader(dataset, batch_size=4)
                for x, y in loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.opt.step()
    """)
    assert output is None
    assert any("no __init__" in m for m in warnings(findings)), warnings(findings)


def test_eval_loop_over_a_loader_built_in_place_is_not_reduced():
    """The training loader is prepared; an eval loop over `DataLoader(...)` built in place is
    not, so each process sees every sample: summing its loss across processes would double it."""
    output, findings = migrate("""
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def epoch(self, dataset):
                for x, y in DataLoader(dataset, batch_size=4):
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.opt.step()

            def evaluate(self, dataset):
                total = 0.0
                for x, y in DataLoader(dataset, batch_size=4):
                    total += nn.functional.mse_loss(self.model(x), y).item()
                return total

            def fit(self, dataset, epochs):
                for _ in range(epochs):
                    self.epoch(dataset)
                    print(self.evaluate(dataset))
    """)
    assert not warnings(findings)
    assert "reduce" not in output and "gather" not in output
    assert "train_loader = self.accelerator.prepare(DataLoader(dataset, batch_size=4))" in output


def test_objects_assigned_by_a_base_class_are_named_in_the_refusal():
    base = """
        class Base:
            def __init__(self, model, loader, optimizer):
                self.model = model
                self.loader = loader
                self.optimizer = optimizer

        class Trainer(Base):
            def fit(self):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.optimizer.step()

        class Evaluator(Base):
            pass
    """
    output, findings = migrate(base)
    assert output is None
    assert any("`self.loader` is never assigned in this class; it is assigned in its base "
               "class `Base.__init__()` (line 8), which `Evaluator` also derives from" in m
               for m in warnings(findings)), warnings(findings)  # fmt: skip
    output, findings = migrate("""
        from trainers import BaseTrainer

        class Trainer(BaseTrainer):
            def fit(self, loader):
                for x, y in loader:
                    self.optimizer.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.optimizer.step()
    """)
    assert output is None
    assert any("its base class `BaseTrainer` is not in this file" in m
               for m in warnings(findings)), warnings(findings)  # fmt: skip


def test_batches_read_by_field_from_a_received_iterator_are_refused():
    """`batch.text` from an iterator the file receives: a torchtext-style iterator, which
    prepare passes through unsharded while the rewrite would drop the batches' `.cuda()`."""
    trainer = """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def fit(self, train_iter):
                for batch in train_iter:
                    text, label = batch.text.cuda(), batch.label.cuda()
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(text), label).backward()
                    self.opt.step()
    """
    output, findings = migrate(trainer)
    assert output is None
    assert any("reads `batch.text` (line 12) from `train_iter`" in m and "torchtext" in m
               for m in warnings(findings)), warnings(findings)  # fmt: skip
    # the same loop over a DataLoader this file builds migrates
    built = trainer.replace("for batch in train_iter:", "for batch in DataLoader(train_iter):")
    output, findings = migrate(built)
    assert output is not None and not warnings(findings)


def test_model_received_by_the_method_making_the_optimizer_is_prepared_there():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, dataset):
                self.loader = DataLoader(dataset, batch_size=4)

            def train(self, model, resume=None):
                if resume is not None:
                    model.load_state_dict(resume)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in self.loader:
                    opt.zero_grad()
                    nn.functional.mse_loss(model(x), y).backward()
                    opt.step()
                return model
    """)
    assert not warnings(findings)
    lines = lines_of(output)
    made = lines.index("opt = torch.optim.SGD(model.parameters(), lr=0.1)")
    assert lines[made + 2] == "model, opt = self.accelerator.prepare(model, opt)"
    assert "self.loader = self.accelerator.prepare(self.loader)" in lines
    assert lines[-1] == "return self.accelerator.unwrap_model(model)"  # the caller's plain model
    notes = [f.message.split(",")[0] for f in without_batch_note(findings) if f.level == "note"]
    assert notes == ["`train` now prepares `model`"]
