"""A prepared model handed to code that does not train it gets `accelerator.unwrap_model(model)`
(model_hand_offs.py): helpers read from their bodies where the program has them, else by
their names; helpers that train keep the wrapper; a helper that cannot be told gets a note
(the held-out review: GPT-2 fine-tuning's `utils.save_model(..., model, ...)` and
`utils.load_checkpoint(path, model, ...)`, a VAE's `visualize_latent_space(config, model,
...)`)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from migrator.analysis.model.hand_offs import (
    EVALUATES,
    LOADS,
    READS,
    SAVES,
    TRAINS,
    BodyReader,
    name_role,
)
from migrator.analysis.model.helper_library import HelperLibrary
from migrator.analysis.syntax.imports import ImportTable
from migrator.engine import Options, migrate_text, render_migration
from migrator.source import quiet_parse

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
{imports}


def main():
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        {call}


if __name__ == "__main__":
    main()
"""


def _migrated(imports: str, call: str):
    output, findings = migrate_text(SCRIPT.format(imports=imports, call=call))
    assert output is not None, findings
    return output, findings


@pytest.mark.parametrize(
    ("imports", "call", "expected"),
    [
        ("from helpers import save_checkpoint", "save_checkpoint(model, 'last.pt')",
         ("if accelerator.is_main_process:\n"
         "            save_checkpoint(accelerator.unwrap_model(model), 'last.pt')")),
        ("import utils", "utils.save_model('out', model, None, checkpoint=True)",
         ("if accelerator.is_main_process:\n"
         "            utils.save_model('out', accelerator.unwrap_model(model), None, "
         "checkpoint=True)")),
        ("from .tools import restore_weights", "restore_weights('init.pt', model=model)",
         "restore_weights('init.pt', model=accelerator.unwrap_model(model))"),
        ("from viz import visualizeLatentSpace", "visualizeLatentSpace(model)",
         "visualizeLatentSpace(accelerator.unwrap_model(model))"),
        ("from viz import plot_weights as show", "show(model, 'weights.png')",
         ("if accelerator.is_main_process:\n"
         "            show(accelerator.unwrap_model(model), 'weights.png')")),
        ("import evaluation as ev", "print(ev.evaluate_model(model, loader))",
         "accelerator.print(ev.evaluate_model(accelerator.unwrap_model(model), loader))"),
        ("import torch.onnx", "torch.onnx.export(model, torch.randn(1, 4), 'model.onnx')",
         "torch.onnx.export(accelerator.unwrap_model(model), torch.randn(1, 4), 'model.onnx')"),
    ],
)  # fmt: skip
def test_a_helper_named_for_what_it_does_gets_the_model_itself(imports, call, expected):
    output, findings = _migrated(imports, call)
    assert f"        {expected}\n" in output
    assert [f.code for f in findings if f.code == "MIG007"] == []


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("from helpers import train_probe", "train_probe(model, x)"),  # trains: the wrapper
        ("from helpers import refine", "refine(model, loader, optimizer)"),  # steps it
        ("import wandb", "wandb.watch(model)"),  # a library: left as it is
        ("", "print(sum(p.numel() for p in model.parameters()))"),
    ],
)
def test_a_helper_that_trains_or_a_library_keeps_the_wrapper(imports, call):
    output, findings = _migrated(imports, call)
    assert "unwrap_model" not in output
    assert [f.code for f in findings if f.code == "MIG007"] == []


@pytest.mark.parametrize(
    "helper",
    ["score_matching", "compute_loss", "sample_and_score", "tidy"],
)
def test_a_helper_the_training_loop_runs_before_its_backward_keeps_the_wrapper(helper):
    # its forward may be the one the backward goes through: DDP syncs only the wrapper's
    source = SCRIPT.format(imports=f"from losses import {helper}", call="pass").replace(
        "loss = torch.nn.functional.mse_loss(model(x), y)",
        f"loss = torch.nn.functional.mse_loss(model(x), y) + {helper}(model, x)",
    )
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert f"+ {helper}(model, x)\n" in output
    assert [f.code for f in findings if f.code == "MIG007"] == []


def test_a_helper_whose_name_says_nothing_gets_a_note_once():
    output, findings = _migrated(
        "from helpers import tidy", "tidy(model)\n        tidy(model)\n        tidy(model)"
    )
    assert "unwrap_model" not in output
    notes = [f for f in findings if f.code == "MIG007"]
    assert len(notes) == 1 and notes[0].level == "note"
    assert "`helpers.tidy(...)` (line" in notes[0].message
    assert "pass `accelerator.unwrap_model(model)` instead" in notes[0].message


def test_a_helper_handed_the_plain_model_before_the_prepare_is_left():
    # the model is prepared where the loop needs it; a set-up call before that has the
    # plain model already
    source = (
        SCRIPT.format(imports="from helpers import load_checkpoint", call="pass")
        .replace(
            "    loader = DataLoader(",
            "    load_checkpoint('init.pt', model)\n    loader = DataLoader(",
        )
        .replace(
            "    for epoch in range(2):\n", "    print(len(loader))\n    for epoch in range(2):\n"
        )
    )
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert "load_checkpoint('init.pt', model)\n" in output


def test_a_function_of_this_file_is_unwrapped_inside_not_at_the_call():
    source = SCRIPT.format(imports="", call="save(model)") + textwrap.dedent("""\


        def save(net):
            torch.save(net.state_dict(), "net.pt")
        """)
    output, _ = migrate_text(source)
    assert "        save(model)\n" in output
    assert 'accelerator.save(accelerator.unwrap_model(net).state_dict(), "net.pt")' in output


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("save_checkpoint", SAVES), ("export_onnx", SAVES), ("utils.save_model", SAVES),
        ("load_checkpoint", LOADS), ("restoreWeights", LOADS), ("resume_from", LOADS),
        ("visualize_latent_space", READS), ("plot_filters", READS), ("log_histograms", READS),
        ("evaluate", EVALUATES), ("calculate_fid_given_dataset", EVALUATES),
        ("run_inference", EVALUATES), ("test_model", EVALUATES),
        ("train_one_epoch", TRAINS), ("fit", TRAINS), ("evaluate_and_train", TRAINS),
        ("tidy", None), ("process", None),
    ],
)  # fmt: skip
def test_what_a_helpers_name_says(name, role):
    assert name_role(name) == role


HELPERS = """\
import torch


def keep(net, path):
    torch.save({"weights": net.state_dict()}, path)


def warm_start(net, path):
    net.load_state_dict(torch.load(path))


def describe(net):
    return net.width


def probe(net, x):
    with torch.no_grad():
        return net(x).sum()


def finetune(net, x, opt):
    net(x).sum().backward()
    opt.step()


def passes_on(net, path):
    return keep(net, path)


def modes(net):
    net.eval()
"""


@pytest.mark.parametrize(
    ("function", "role"),
    [("keep", SAVES), ("warm_start", LOADS), ("describe", READS), ("probe", EVALUATES),
     ("finetune", TRAINS), ("passes_on", SAVES), ("modes", None)],
)  # fmt: skip
def test_what_a_helpers_body_does_with_the_model(function, role):
    tree = quiet_parse(HELPERS)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    imports = ImportTable()
    imports.add_import(tree.body[0])
    assert BodyReader(functions, imports).role(functions[function], "net") == role


def test_the_library_reads_bodies_where_names_say_nothing():
    # `helpers.describe` and `helpers.modes` tell nothing by name: their bodies do
    library = HelperLibrary()
    library.add("helpers", quiet_parse(HELPERS))
    source = SCRIPT.format(
        imports="import helpers",
        call="print(helpers.describe(model))\n        helpers.modes(model)",
    )
    text = source
    output, _context, findings = render_migration(text, quiet_parse(text), Options(),
                                                  library=library)  # fmt: skip
    assert "accelerator.print(helpers.describe(accelerator.unwrap_model(model)))" in output
    assert "        helpers.modes(model)\n" in output
    assert not [f for f in findings if f.code == "MIG007"]


def test_a_helper_module_writing_runs_on_the_main_process_only_when_handed_the_model():
    # `helpers.keep(model, path)` writes a checkpoint: main process only; `prepare_data()`
    # writes files the others read next: every process still runs it
    library = HelperLibrary()
    library.add("helpers", quiet_parse(HELPERS + "\n\ndef prepare_data():\n"
                                       "    torch.save(torch.zeros(2), 'data.pt')\n"))  # fmt: skip
    source = SCRIPT.format(
        imports="import helpers",
        call="helpers.keep(model, 'last.pt')\n        helpers.prepare_data()",
    )
    output, _context, _findings = render_migration(source, quiet_parse(source), Options(),
                                                   library=library)  # fmt: skip
    assert (
        "        if accelerator.is_main_process:\n"
        "            helpers.keep(accelerator.unwrap_model(model), 'last.pt')\n"
        "        helpers.prepare_data()\n"
    ) in output
