"""Where a loop's loaders come from (analysis/model/loader_values.py, container_sources.py,
roles/eval_loaders.py): a value is a DataLoader when it flows from `DataLoader(...)` through a
program function's return, an alias, a dict, list or tuple, or a loop variable; every such
loader a loop iterates is prepared once, or a note names it and says why it stays plain
(SPEC §3b.1). The migrated fixtures run on two processes in test_loader_flows_runs.py."""

from __future__ import annotations

import ast
import textwrap

import pytest

from migrator.analysis.model.loader_values import LoaderValues
from migrator.analysis.syntax.index import ModuleIndex
from migrator.engine import migrate_text
from migrator.source import Source
from tests.fixtures import GOLDEN, without_batch_note

PROGRAM = textwrap.dedent("""\
    from torch.utils.data import DataLoader

    def make(ds):
        loader = DataLoader(ds)
        return loader, [1, 2]

    def split(ds):
        return {"train": DataLoader(ds), "sizes": len(ds)}

    def main(ds, items):
        train, sizes = make(ds)
        alias = train
        pair = (train, DataLoader(ds))
        by_phase = {p: DataLoader(ds) for p in ["a", "b"]}
        parts = split(ds)
        plain = items
        first = train, 3
""")


@pytest.fixture(scope="module")
def program():
    index = ModuleIndex(ast.parse(PROGRAM), Source(PROGRAM))
    return LoaderValues(index), index.functions["main"]


@pytest.mark.parametrize("expression", [
    "train", "alias", "pair[0]", "pair[1]", "pair[i]", "by_phase['a']", "by_phase[phase]",
    "parts['train']", "make(ds)[0]",
])  # fmt: skip
def test_values_that_flow_from_a_dataloader(program, expression):
    values, main = program
    assert values.is_loader(main, ast.parse(expression, mode="eval").body)


@pytest.mark.parametrize("expression", [
    "sizes", "items", "plain", "parts['sizes']", "parts[key]", "first", "pair[2]", "ds",
])  # fmt: skip
def test_values_that_do_not(program, expression):
    values, main = program
    assert not values.is_loader(main, ast.parse(expression, mode="eval").body)


def _migrated(name: str) -> tuple[str, list]:
    output, findings = migrate_text((GOLDEN / f"{name}.in.py").read_text())
    assert output is not None
    return output, findings


def test_each_plain_evaluation_loader_is_named_with_its_reason():
    _output, findings = _migrated("eval_loader_left_plain")
    notes = sorted(f.message for f in without_batch_note(findings) if f.code == "MIG006")
    assert len(notes) == 2, notes
    assert notes[0].startswith("`loader`, which the loop at line 19 evaluates on, is not prepared")
    assert "another object of the same name, `loader`, is prepared in `main()`" in notes[0]
    assert notes[1].startswith("the DataLoader, which the loop at line 45 evaluates on")
    assert "built in the loop's head" in notes[1]


def test_a_test_loader_made_under_a_flag_is_prepared_in_that_branch():
    output, _findings = _migrated("eval_loader_left_plain")
    assert (
        "        test_loader = DataLoader(check_set, batch_size=4)\n"
        "        test_loader = accelerator.prepare(test_loader)\n"
    ) in output


def test_a_container_of_named_loaders_is_filled_with_prepared_ones():
    output, _findings = _migrated("loaders_dict_by_phase")
    assert (
        "    loader_train = accelerator.prepare(loader_train)\n"
        "    loader_valid = accelerator.prepare(loader_valid)\n"
        '    loaders = {"train": loader_train, "valid": loader_valid}\n'
    ) in output


def test_unnamed_loaders_are_prepared_where_the_container_is_made():
    output, _findings = _migrated("loaders_dict_comprehension")
    assert "dataloaders = {x: accelerator.prepare(DataLoader(image_datasets[x]," in output
    output, _findings = _migrated("loaders_dict_from_helper")
    assert 'return {"train": accelerator.prepare(train), "test": accelerator.prepare(test)}' in (
        output
    )


def test_a_loop_variable_over_loaders_built_before_the_model():
    source = textwrap.dedent("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        def main():
            data = TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
            train_loader = DataLoader(data, batch_size=4)
            val_loader = DataLoader(data, batch_size=8)
            pairs = [("train", train_loader), ("val", val_loader)]
            model = nn.Linear(2, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for phase, loader in pairs:
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x), y)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
    """)
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert (
        "    train_loader = accelerator.prepare(train_loader)\n"
        "    val_loader = accelerator.prepare(val_loader)\n"
        '    pairs = [("train", train_loader), ("val", val_loader)]\n'
    ) in output
    assert not any(f.code == "MIG905" for f in findings)


def test_a_dict_of_loaders_is_no_loaderless_loop():
    _output, findings = _migrated("loaders_dict_by_phase")
    assert not [f for f in findings if f.code == "MIG905"]
    _output, findings = _migrated("tensors_by_phase_loaderless")
    # and the tensors it makes on the CPU keep the program there (MIG004, host_inputs.py)
    assert sorted(f.code for f in findings) == ["MIG004", "MIG905"]


def test_an_iterable_the_model_runs_on_that_no_dataloader_reaches_is_named():
    """A test set from a module outside the program: it may be a DataLoader or a list of
    tensors; it stays plain (its batches keep their `.to(device)`) and a note says so."""
    source = textwrap.dedent("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset
        from data import held_out_batches

        def main():
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            loader = DataLoader(TensorDataset(torch.randn(16, 2), torch.randn(16, 1)), batch_size=4)
            model = nn.Linear(2, 1).to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
            test_batches = held_out_batches()
            with torch.no_grad():
                for x, y in test_batches:
                    x = x.to(device)
                    print(model(x).sum().item())
    """)
    output, findings = migrate_text(source)
    assert output is not None
    assert "            x = x.to(device)\n" in output
    [note] = [f.message for f in without_batch_note(findings) if f.code == "MIG006"]
    assert note.startswith(
        "`test_batches`, which the loop at line 18 evaluates on, is not prepared"
    )
    assert "it comes from `held_out_batches(...)`" in note


def test_a_migration_its_prepared_evaluation_loader_makes_unsound_keeps_it_plain():
    """The engine's second try: with the validation loader prepared, the inputs would be
    gathered before the model runs on them (refused by the soundness check); plain, the
    migration is sound, and the note says why the loader stays plain."""
    output, findings = _migrated("eval_loader_kept_plain_for_its_metric")
    assert "model, optimizer, train_loader = accelerator.prepare(" in output
    assert "gather_for_metrics" not in output
    [note] = [f.message for f in without_batch_note(findings) if f.code != "MIG004"]
    assert note.startswith("`val_loader`, which the loop at line 16 evaluates on, is not prepared")
    # its batches stay on the CPU, where the program computed: the model stays there too
    assert "    accelerator = Accelerator(cpu=True)\n" in output
    assert "the soundness check refused that version" in note


EVALUATE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, dataset):
    loader = DataLoader(dataset, batch_size=4)
    outputs = []
    with torch.no_grad():
        for (x,) in loader:
            outputs.append(model(x))
    return outputs


train = DataLoader(TensorDataset(torch.randn(16, 2), torch.randn(16, 1)), batch_size=4)
held_out = TensorDataset(torch.randn(8, 2))
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
{driver}
"""
EPOCHS = """\
for epoch in range(2):
    for x, y in train:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    {call}
"""


@pytest.mark.parametrize(
    "driver",
    [
        EPOCHS.format(call="evaluate(model, held_out)"),
        EPOCHS.replace(
            "for epoch in range(2):", "epoch = 0\nwhile epoch < 2:\n    epoch += 1"
        ).format(call="outputs = evaluate(model, held_out)"),
    ],
    ids=["for", "while"],
)
def test_a_loader_made_in_a_function_run_every_epoch_is_not_prepared_there(driver):
    # SPEC §3b.7: a prepare in a function called once per epoch prepares a new loader each call
    output, findings = migrate_text(EVALUATE.format(driver=driver))
    assert output is not None and "accelerator.prepare(loader)" not in output
    notes = [f.message for f in findings if f.code == "MIG006"]
    assert any("runs once per pass of a loop" in m for m in notes), notes


def test_a_loader_made_in_a_function_run_once_after_training_is_prepared_there():
    driver = EPOCHS.format(call="pass") + "evaluate(model, held_out)\n"
    output, findings = migrate_text(EVALUATE.format(driver=driver))
    assert output is not None and "loader = accelerator.prepare(loader)" in output
    assert not any("runs once per pass" in f.message for f in findings)
