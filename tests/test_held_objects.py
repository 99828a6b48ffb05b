"""Models, optimizers and schedulers held on a config object the class or function receives
(issue 16 item 3): the attribute chain is the object's name, prepared where its holder is
bound. The reviewed goldens (fixtures/golden/trainer_config_object_received,
function_config_namespace) run here on two processes through an unmigrated driver."""

from __future__ import annotations

import re
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.test_class_objects import lines_of, warnings
from tests.test_idioms_objects import launch, migrated

HEADER = """\
import torch
import torch.nn as nn
"""


def migrate(body: str):
    return migrate_text(HEADER + textwrap.dedent(body))


def notes(findings) -> list[str]:
    return [f.message for f in findings if f.level == "note"]


TRAINER = """
    class Trainer:
        def __init__(self, cfg, loader):
            self.cfg = cfg
            self.loader = loader
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
            self.cfg.model.to(self.device)

        def fit(self):
            for x, y in self.loader:
                x, y = x.to(self.device), y.to(self.device)
                self.cfg.optimizer.zero_grad()
                nn.functional.mse_loss(self.cfg.model(x), y).backward()
                self.cfg.optimizer.step()
"""


def test_chains_on_a_received_config_are_prepared_after_the_holder_is_kept():
    output, findings = migrate(TRAINER)
    assert not warnings(findings)
    lines = lines_of(output)
    kept = lines.index("self.loader = loader")
    assert lines[kept + 2 : kept + 5] == [
        "self.cfg.model, self.cfg.optimizer, self.loader = self.accelerator.prepare(",
        "self.cfg.model, self.cfg.optimizer, self.loader",
        ")",
    ]
    assert "self.cfg.model.to(self.device)" not in lines  # prepare places the model
    assert "x, y = x.to(self.device), y.to(self.device)" not in lines
    assert "self.accelerator.backward(nn.functional.mse_loss(self.cfg.model(x), y))" in lines


def test_the_note_names_the_chains_the_callers_pass_in_and_their_holder():
    _output, findings = migrate(TRAINER)
    (note,) = [n for n in notes(findings) if "callers pass in" in n]
    assert note.startswith("`__init__` now prepares `self.cfg.model`, `self.cfg.optimizer`,")
    assert note.endswith("the prepared objects replace them on `self.cfg`, the object the "
                         "callers passed in")  # fmt: skip


def test_a_local_alias_of_the_holder_reads_the_same_objects():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, cfg, loader):
                self.cfg = cfg
                self.loader = loader

            def fit(self):
                cfg = self.cfg
                cfg.model.train()
                for x, y in self.loader:
                    cfg.optimizer.zero_grad()
                    nn.functional.mse_loss(cfg.model(x), y).backward()
                    cfg.optimizer.step()
    """)
    assert not warnings(findings)
    assert "self.cfg.model, self.cfg.optimizer, self.loader = self.accelerator.prepare(" in (
        lines_of(output)
    )


def test_a_config_built_by_a_module_level_caller_is_prepared_there():
    output, findings = migrate("""
        from types import SimpleNamespace

        def train(cfg, loader):
            cfg.model.train()
            for x, y in loader:
                cfg.optimizer.zero_grad()
                nn.functional.mse_loss(cfg.model(x), y).backward()
                cfg.optimizer.step()

        if __name__ == "__main__":
            model = nn.Linear(4, 1)
            cfg = SimpleNamespace(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
            loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)
            train(cfg, loader)
    """)
    assert not warnings(findings)
    lines = lines_of(output)
    call = lines.index("train(cfg, loader)")
    assert lines[call - 3 : call] == [
        "cfg.model, cfg.optimizer, loader = accelerator.prepare(",
        "cfg.model, cfg.optimizer, loader",
        ")",
    ]
    assert not [n for n in notes(findings) if "callers pass in" in n]  # made here, not received


def test_model_kept_on_self_and_optimizer_on_the_config_are_prepared_together():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, model, config, loader):
                self.model = model
                self.config = config
                self.loader = loader

            def fit(self):
                self.model.train()
                for x, y in self.loader:
                    self.config.optimiser.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.config.optimiser.step()
                self.config.scheduler.step(0.0)
    """)
    assert not warnings(findings)
    assert "self.model, self.config.optimiser, self.loader = self.accelerator.prepare(" in (
        lines_of(output)
    )
    assert "self.config.optimiser" in " ".join(n for n in notes(findings) if "callers" in n)
    assert any(n.startswith("scheduler `self.config.scheduler` is not prepared: it steps on a "
                            "metric") for n in notes(findings))  # fmt: skip


def test_objects_in_a_received_dict_are_prepared_by_key():
    output, findings = migrate("""
        def train(parts, loader):
            parts["model"].train()
            for x, y in loader:
                parts["optimizer"].zero_grad()
                nn.functional.mse_loss(parts["model"](x), y).backward()
                parts["optimizer"].step()
    """)
    assert not warnings(findings)
    assert 'parts["model"], parts["optimizer"], loader = accelerator.prepare(' in lines_of(output)


def test_a_frozen_dataclass_holder_is_refused_naming_the_class():
    output, findings = migrate("""
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Setup:
            model: nn.Module
            optimizer: torch.optim.Optimizer

        class Trainer:
            def __init__(self, setup: Setup, loader):
                self.setup = setup
                self.loader = loader
                self.setup.model.to("cuda")

            def fit(self):
                for x, y in self.loader:
                    self.setup.optimizer.zero_grad()
                    nn.functional.mse_loss(self.setup.model(x), y).backward()
                    self.setup.optimizer.step()
    """)
    assert output is None
    assert warnings(findings) == [
        (
            "`self.setup.model` is held on `self.setup`, an instance of `Setup` (line 7), a "
            "frozen dataclass: `accelerator.prepare` cannot store the prepared object back on "
            "it; keep the object on its own name (`self.model = self.setup.model`) and train "
            "that, then migrate"
        )
    ]


def test_a_named_tuple_holder_is_refused_naming_the_class():
    output, findings = migrate("""
        from typing import NamedTuple

        class Parts(NamedTuple):
            model: nn.Module
            optimizer: torch.optim.Optimizer

        def train(parts: Parts, loader):
            parts.model.train()
            for x, y in loader:
                parts.optimizer.zero_grad()
                nn.functional.mse_loss(parts.model(x), y).backward()
                parts.optimizer.step()
    """)
    assert output is None
    (warning,) = warnings(findings)
    assert warning.startswith("`parts.model` is held on `parts`, an instance of `Parts` (line 6), "
                              "a NamedTuple:")  # fmt: skip


def test_a_chain_handed_over_before_the_loader_exists_is_refused_naming_both_lines():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, cfg, data):
                self.cfg = cfg
                self.ema = torch.optim.swa_utils.AveragedModel(self.cfg.model)
                self.loader = torch.utils.data.DataLoader(data, batch_size=8)

            def fit(self):
                self.cfg.model.train()
                for x, y in self.loader:
                    self.cfg.optimizer.zero_grad()
                    nn.functional.mse_loss(self.cfg.model(x), y).backward()
                    self.cfg.optimizer.step()
    """)
    assert output is None
    (warning,) = warnings(findings)
    assert "found `self.cfg.model` used at line 7" in warning
    assert "`self.loader` defined at line 8" in warning


def test_a_chain_run_but_never_placed_is_refused_saying_so():
    output, findings = migrate("""
        def train(cfg, loader):
            for x, y in loader:
                cfg.optimizer.zero_grad()
                nn.functional.mse_loss(cfg.model(x), y).backward()
                cfg.optimizer.step()
    """)
    assert output is None
    (warning,) = warnings(findings)
    assert warning.startswith("could not tell which model the optimizer trains: "
                              "`cfg.optimizer` is not built in `train()`")  # fmt: skip


DRIVER = """\
from types import SimpleNamespace

import torch
import torch.nn as nn
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.utils.data import DataLoader, TensorDataset

from namespace_lib import train
from trainer_lib import RunConfig, Trainer

torch.manual_seed(0)
features, labels = torch.randn(96, 5), torch.randn(96, 1)
train_loader = DataLoader(TensorDataset(features[:64], labels[:64]), batch_size=8, shuffle=True)
val_loader = DataLoader(TensorDataset(features[64:], labels[64:]), batch_size=8)
net = nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, 1))
optimiser = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
config = RunConfig(net, optimiser, ReduceLROnPlateau(optimiser, patience=1), nn.MSELoss())
Trainer(config, train_loader, val_loader).fit()
print(f"trainer weights {sum(p.sum().item() for p in net.parameters()):.6f}")
cfg = SimpleNamespace(model=nn.Linear(5, 1), loss_fn=nn.MSELoss(), epochs=2)
cfg.optimizer = torch.optim.SGD(cfg.model.parameters(), lr=0.1)
model = train(cfg, train_loader)
print(f"namespace weights {model.weight.sum().item():.6f} returned {type(model).__name__}")
"""


@pytest.mark.slow
def test_config_held_objects_run_on_two_processes_with_equal_weights(tmp_path):
    (tmp_path / "trainer_lib.py").write_text(migrated("trainer_config_object_received").read_text())
    (tmp_path / "namespace_lib.py").write_text(migrated("function_config_namespace").read_text())
    (tmp_path / "driver.py").write_text(DRIVER)
    done = launch(tmp_path / "driver.py", tmp_path)
    # 64 samples, batch 8, two processes: 4 batches each; the main process prints
    assert done.stdout.count("epoch 1: 4 batches") == 1, done.stdout
    # the samples seen are summed over the processes (MIG032): the 1-process count
    assert done.stdout.count("train epoch 1: 64 samples") == 1, done.stdout
    # the gradients were averaged: both ranks end with the same weights (the driver prints on
    # both; their lines can interleave, so they are found by pattern)
    for what in ("trainer weights", "namespace weights"):
        found = re.findall(rf"{what} -?[0-9.]+", done.stdout)
        assert len(found) == 2 and found[0] == found[1], done.stdout
    assert done.stdout.count("returned Linear") == 2  # the plain model comes back


def test_optimizer_built_on_a_held_models_parameters_prepares_that_model_not_its_holder():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, cfg, loader):
                self.cfg = cfg
                self.loader = loader
                self.optimizer = torch.optim.Adam(self.cfg.model.parameters(), lr=1e-3)

            def fit(self):
                self.cfg.model.train()
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    nn.functional.mse_loss(self.cfg.model(x), y).backward()
                    self.optimizer.step()
    """)
    assert not warnings(findings)
    lines = lines_of(output)
    assert "self.cfg.model, self.optimizer, self.loader = self.accelerator.prepare(" in lines
    assert "unwrap_model(self.cfg)" not in output  # `self.cfg` is the holder, not the model


def test_a_loader_held_on_the_config_is_prepared_and_sharded_with_the_model():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, cfg, loader):
                self.cfg = cfg
                self.cfg.loader = loader

            def fit(self):
                self.cfg.model.train()
                for x, y in self.cfg.loader:
                    self.cfg.optimizer.zero_grad()
                    nn.functional.mse_loss(self.cfg.model(x), y).backward()
                    self.cfg.optimizer.step()
    """)
    assert not warnings(findings)
    assert not [f for f in findings if f.code == "MIG905"]  # a loader, not unsharded batches
    lines = lines_of(output)
    kept = lines.index("self.cfg.loader = loader")
    assert lines[kept + 2] == (
        "self.cfg.model, self.cfg.optimizer, self.cfg.loader = self.accelerator.prepare("
    )


def test_a_held_models_own_attributes_and_saves_go_through_unwrap_model():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, cfg, loader):
                self.cfg = cfg
                self.loader = loader

            def fit(self):
                cfg = self.cfg
                cfg.model.train()
                for x, y in self.loader:
                    self.cfg.optimizer.zero_grad()
                    nn.functional.mse_loss(self.cfg.model(x), y).backward()
                    self.cfg.optimizer.step()
                norm = self.cfg.model.weight.norm()
                torch.save(cfg.model.state_dict(), "model.pt")
    """)
    assert not warnings(findings)
    lines = lines_of(output)
    assert "norm = self.accelerator.unwrap_model(self.cfg.model).weight.norm()" in lines
    assert (
        'self.accelerator.save(self.accelerator.unwrap_model(cfg.model).state_dict(), "model.pt")'
        in lines
    )
    assert "cfg.model.train()" in lines  # nn.Module's own API answers on the prepared model


def test_local_names_for_held_objects_in_a_method_are_prepared_once_in_init():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, cfg, loader):
                self.cfg = cfg
                self.loader = loader

            def train_epoch(self):
                model = self.cfg.model
                optimizer = self.cfg.optimizer
                model.train()
                for x, y in self.loader:
                    optimizer.zero_grad()
                    nn.functional.mse_loss(model(x), y).backward()
                    optimizer.step()
    """)
    assert not warnings(findings)
    lines = lines_of(output)
    assert "self.cfg.model, self.cfg.optimizer, self.loader = self.accelerator.prepare(" in lines
    assert output.count(".prepare(") == 1  # not again in the method each epoch runs


def test_local_names_taken_from_a_holder_made_in_the_same_function_stay_the_prepared_names():
    output, findings = migrate("""
        from types import SimpleNamespace

        def main(data):
            parts = SimpleNamespace(loader=torch.utils.data.DataLoader(data, batch_size=4))
            loader = parts.loader
            model = nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
    """)
    assert not warnings(findings)
    # `loader` was bound before the prepare point: preparing `parts.loader` would leave it plain
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in (
        lines_of(output)
    )
