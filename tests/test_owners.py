"""Which function owns training when the objects cross a function boundary (issue 16 item 1,
small2 survey §3): a sweep, fold or grid-search loop that calls a function which trains over
its own loop is a driver, not a training loop; one epoch function fed the training loader
(with the optimizer) and plain evaluation loaders; two trainer classes in one file; and the
messages that name what the loops iterate."""

from __future__ import annotations

import difflib
import re
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, without_batch_note
from tests.test_idioms_objects import launch


def _changed_lines(name: str) -> tuple[list[str], list[str]]:
    """(removed, added) lines of a golden fixture's migration, as migrate makes it today."""
    source = (GOLDEN / f"{name}.in.py").read_text()
    output, _findings = migrate_text(source)
    assert output == (GOLDEN / f"{name}.out.py").read_text()
    return changed(source, output)


def changed(source: str, output: str) -> tuple[list[str], list[str]]:
    """(removed, added) lines from `source` to `output`."""
    diff = list(difflib.ndiff(source.splitlines(), output.splitlines()))
    removed = [line[2:] for line in diff if line.startswith("- ")]
    added = [line[2:] for line in diff if line.startswith("+ ")]
    return removed, added


def test_a_sweep_over_widths_prepares_in_the_function_that_makes_the_objects():
    removed, added = _changed_lines("sweep_calls_trainer")
    assert added == [
        "from runtime import Accelerator",
        "        accelerator.backward(loss)",
        # the mean of this process's batch losses, over the processes (MIG032): the loader
        # comes back from a helper of the program, a prepared loader all the same
        '    total = accelerator.reduce(torch.tensor(total, device=accelerator.device), "mean").item()',
        "            outputs = model(inputs)",
        "            outputs, labels = accelerator.gather_for_metrics((outputs, labels))",
        "            correct += (outputs.argmax(dim=1) == labels).sum().item()",
        "    model = nn.Sequential(nn.Linear(6, width), nn.ReLU(), nn.Linear(width, 2))",
        "",
        "    model, optimizer, train_loader, val_loader = accelerator.prepare(",
        "        model, optimizer, train_loader, val_loader",
        "    )",
        # the sweep seeds each width alike on every process; the others draw apart from here
        "    if accelerator.process_index:  # each process draws its own randomness from here on",
        "        torch.manual_seed(width + accelerator.process_index)",
        (
            '        accelerator.print(f"width {width} epoch {epoch} batches {len(train_loader)} '
            'loss {loss:.4f}")'
        ),
        "    device = accelerator.device",
        '    accelerator.print("records", records)',
        # main() runs only from the script's guard: the Accelerator is made there
        "    accelerator = Accelerator()",
    ]
    # the batches of both prepared loaders are placed; the evaluation counts gathered ones
    assert removed[:3] == [
        "        inputs = inputs.to(device)",
        "        labels = labels.to(device)",
        "        loss.backward()",
    ]
    assert "            inputs, labels = inputs.to(device), labels.to(device)" in removed


def test_a_grid_search_over_a_list_of_rates_prepares_where_the_objects_meet():
    removed, added = _changed_lines("grid_search_meeting")
    assert (
        "    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)"
        in added
    )
    assert "    device = accelerator.device" in added  # main()'s device reaches fit() and the model
    assert "            features, target = features.to(device), target.to(device)" in removed
    # nothing is prepared in the grid search, whose `lrs` is no loader
    output = (GOLDEN / "grid_search_meeting.out.py").read_text()
    assert output.count("accelerator.prepare(") == 1
    assert "        candidate = copy.deepcopy(model)\n" in output


def test_a_train_and_eval_epoch_function_prepares_the_training_loader_only():
    source = (GOLDEN / "shared_train_eval_epoch.in.py").read_text()
    output, findings = migrate_text(source)
    removed, added = _changed_lines("shared_train_eval_epoch")
    assert (
        "    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)"
        in added
    )
    # the shared loop keeps its placement: the evaluation loaders stay plain
    assert "        x = x.to(device)\n        y = y.to(device)\n" in output
    assert removed == [
        "            loss.backward()",
        "    model = nn.Linear(4, 1).to(device)",
        '        print(f"fold {fold} epoch {epoch} train {train_loss:.4f} val {val_loss:.4f}")',
        '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        '    print("test", [round(s, 4) for s in scores])',
    ]
    notes = [f.message for f in findings if f.code == "MIG006" and "same loop" in f.message]
    assert notes == [
        (
            "`run_epoch()` trains on `train_loader` (prepared) and evaluates `val_loader`, "
            "`test_loader` through the same loop (its `loader` parameter): those stay plain, so "
            "every process evaluates the whole set and gets the same metrics (for a plateau "
            "scheduler, early stopping, the best checkpoint); the loop keeps moving their "
            "batches with its own `.to(...)`"
        )
    ]


SHARED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def run_epoch(model, loader, optimizer=None):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def fold(data):
    train_loader = DataLoader(data, batch_size=4)
    val_loader = DataLoader(data, batch_size=4)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    run_epoch(model, train_loader, optimizer)
    run_epoch(model, val_loader)
"""


def test_two_training_calls_with_different_loaders_are_still_refused():
    source = SHARED + "    run_epoch(model, val_loader, optimizer)\n"
    output, findings = migrate_text(source)
    assert output is None
    assert [f.code for f in findings if f.needs_human] == ["MIG900"]
    assert (
        "the calls pass `train_loader` at line 19, `val_loader` at line 20, `val_loader` at line 21"
        in findings[0].message
    )


def test_an_optimizer_rebound_in_the_epoch_function_is_not_an_omitted_argument():
    # `optimizer=None` re-bound inside: a call omitting it trains with the function's own
    source = SHARED.replace(
        "    for x, y in loader:\n",
        "    if optimizer is None:\n        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for x, y in loader:\n",
    )
    output, findings = migrate_text(source)
    assert output is None and [f.code for f in findings if f.needs_human] == ["MIG900"]


def test_two_trainer_classes_in_one_file_are_named_each_with_its_loops():
    source = textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader


        class SmallTrainer:
            def __init__(self, model, train_loader):
                self.model = model
                self.train_loader = train_loader
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def train(self):
                for x, y in self.train_loader:
                    loss = torch.nn.functional.mse_loss(self.model(x), y)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()


        class BigTrainer:
            def __init__(self, model, dataset):
                self.model = model
                self.train_loader = DataLoader(dataset, batch_size=8)
                self.optimizer = torch.optim.AdamW(self.model.parameters())

            def train(self):
                for x, y in self.train_loader:
                    loss = torch.nn.functional.mse_loss(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
                    self.optimizer.zero_grad()
        """)
    output, findings = migrate_text(source)
    assert output is None
    assert [f.message for f in findings] == [
        (
            "2 independent trainer classes train in this file, each over loaders of its own: "
            "`SmallTrainer` (line 5; training loop at line 12 over `self.train_loader`, the "
            "parameter `train_loader` kept at line 8 in `SmallTrainer.__init__()` (line 6)); "
            "`BigTrainer` (line 19; training loop at line 26 over `self.train_loader`, a "
            "DataLoader made at line 22 in `BigTrainer.__init__()` (line 20)); one migration "
            "prepares one owner's objects, so migrate one class at a time by hand (or move each "
            "class to its own module, which then migrates on its own)"
        ),
        "this file is left as it is: the MIG900 finding at this line blocks its migration",
    ]


def test_a_loop_over_a_list_of_constants_is_not_called_a_loader():
    source = textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scales = [0.5, 1.0]
        for scale in scales:
            loss = model(torch.ones(1, 2) * scale).sum()
            loss.backward()
            optimizer.step()


        def tune(data):
            loader = DataLoader(data, batch_size=4)
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
        """)
    output, findings = migrate_text(source)
    assert output is None
    assert [f.message for f in findings] == [
        (
            "looked for one scope that makes every loader the training loops draw from; found "
            "`scales` at module level, a list of constants (line 6), not a DataLoader, `loader`, "
            "a DataLoader made at line 14 in `tune()` (line 13); migrate by hand"
        ),
        "this file is left as it is: the MIG900 finding at this line blocks its migration",
    ]


def test_a_step_two_loops_reach_is_named_once():
    source = textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset


        def step(model, x, y, scheduler):
            torch.nn.functional.mse_loss(model(x), y).backward()
            scheduler.step()


        def main():
            loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=4)
            model = torch.nn.Linear(2, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
            for x, y in loader:
                step(model, x, y, scheduler)
            for x, y in loader:
                step(model, x, y, scheduler)
        """)
    output, findings = migrate_text(source)
    assert output is None
    assert [f.message for f in findings] == [
        (
            "looked for an optimizer made in `main()` (line 10), where `loader` is made or "
            "received, and stepped in the training loop at line 15; found `scheduler.step()` "
            "at line 7 steps a scheduler; migrate by hand"
        ),
        "this file is left as it is: the MIG900 finding at this line blocks its migration",
    ]


DRIVER = """\
import torch
from torch.utils.data import TensorDataset

import runpy

import flag_lib

# each migrated script as it runs: its Accelerator is made in its `__main__` block
for script in ("sweep_lib.py", "shared_lib.py", "grid_lib.py"):
    runpy.run_path(script, run_name="__main__")
torch.manual_seed(0)
runner = flag_lib.Runner(torch.nn.Linear(3, 1), TensorDataset(torch.randn(32, 3), torch.randn(32, 1)))
runner.fit(2)
weight = runner.accelerator.unwrap_model(runner.model).weight.sum().item()
print(f"flag weights {weight:.6f}")  # on both ranks
"""


@pytest.mark.slow
def test_sweeps_folds_and_grid_searches_run_on_two_processes(tmp_path):
    for name, module in [("sweep_calls_trainer", "sweep_lib"),
                         ("shared_train_eval_epoch", "shared_lib"),
                         ("grid_search_meeting", "grid_lib")]:  # fmt: skip
        (tmp_path / f"{module}.py").write_text((GOLDEN / f"{name}.out.py").read_text())
    output, _findings = migrate_text(FLAGGED)
    (tmp_path / "flag_lib.py").write_text(output)
    (tmp_path / "driver.py").write_text(DRIVER)
    done = launch(tmp_path / "driver.py", tmp_path)
    out = done.stdout
    # widths 4 and 16, 2 epochs each; 64 samples, batch 8, two processes: 4 batches each,
    # printed once (the main process)
    widths = re.findall(r"^width (\d+) epoch \d batches (\d+) loss", out, re.MULTILINE)
    assert widths == [("4", "4"), ("4", "4"), ("16", "4"), ("16", "4")], out
    records = [line for line in out.splitlines() if line.startswith("records")]
    assert len(records) == 1 and "'width': 16" in records[0], out
    # two folds of three epochs, the validation loss the same plain set on both processes
    assert out.count("fold 1 epoch 2 train") == 1, out
    assert len([line for line in out.splitlines() if line.startswith("test [")]) == 1
    # two rates, 64 samples, batch 8: 4 batches a process per epoch, the loader re-prepared
    assert (
        out.count("lr 0.01 epoch 1 batches 4") == 1 and out.count("lr 0.03 epoch 1 batches 4") == 1
    ), out
    assert out.count("best lr") == 1
    # the train/eval method switched by a flag: gradients averaged, both ranks end the same
    weights = re.findall(r"flag weights -?[0-9.]+", out)
    assert len(weights) == 2 and weights[0] == weights[1], out


FLAGGED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Runner:
    def __init__(self, model, data):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.train_loader = DataLoader(data, batch_size=4, shuffle=True)
        self.val_loader = DataLoader(data, batch_size=4)

    def _epoch(self, loader, train: bool = True):
        for x, y in loader:
            x, y = x.to("cpu"), y.to("cpu")
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            if train:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

    def fit(self, epochs):
        for _ in range(epochs):
            self._epoch(self.train_loader)
            self._epoch(self.val_loader, train=False)
"""


def test_an_epoch_method_switched_by_a_train_flag_prepares_the_training_loader():
    output, findings = migrate_text(FLAGGED)
    assert output is not None, findings
    assert (
        "        self.model, self.optimizer, self.train_loader = self.accelerator.prepare(\n"
        "            self.model, self.optimizer, self.train_loader\n        )\n"
    ) in output
    assert "        self.val_loader = DataLoader(data, batch_size=4)\n" in output
    # the plain validation batches are still placed, on the process's device
    assert (
        "            x, y = x.to(self.accelerator.device), y.to(self.accelerator.device)\n"
        in output
    )
    messages = [f.message for f in without_batch_note(findings) if f.code == "MIG006"]
    assert [f.code for f in without_batch_note(findings)] == ["MIG006", "MIG006"]
    assert any("evaluates `self.val_loader` through the same loop" in m for m in messages)
    # `self.model = model`: the model its callers made
    assert any(m.startswith("`__init__` now prepares `self.model`, which") for m in messages)


def test_a_train_flag_passed_a_variable_is_not_read():
    source = FLAGGED.replace("self._epoch(self.val_loader, train=False)",
                             "self._epoch(self.val_loader, train=epochs > 9)")  # fmt: skip
    output, findings = migrate_text(source)
    assert output is None and [f.code for f in findings if f.needs_human] == ["MIG900"]


def test_an_eval_loader_the_epoch_function_also_evaluates_stays_plain_in_its_own_loop():
    # `val_loader` is evaluated by run_epoch() and by a loop of its own: prepared, the shared
    # evaluation would see one process's shard while the note says it stays whole
    source = SHARED + "    for x, y in val_loader:\n        print(model(x.to('cpu')).sum())\n"
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert (
        "    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)\n"
        in output
    )
    assert "        accelerator.print(model(x.to(accelerator.device)).sum())\n" in output
    assert any("evaluates `val_loader` through the same loop" in f.message for f in findings)
