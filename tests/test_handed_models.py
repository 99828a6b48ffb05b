"""Which model an optimizer trains when it is built through a helper that receives the model
(`AdamW(add_weight_decay(model_without_ddp, wd))`, `create_optimizer(args, model)`): the one
argument that names a model the loop runs, through a `model_without_ddp = model` alias; and a
refused program's files each say where the refusal is."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from migrator.engine import migrate_text
from migrator.findings import Finding
from migrator.program.files import ProgramFile
from migrator.program.findings import unchanged

LOOP = """\
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def _script(optimizer_lines: str) -> str:
    head = textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        from optim_factory import add_weight_decay, create_optimizer


        def main(args):
            loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
            model = torch.nn.Linear(4, 1)
            model_without_ddp = model
            head = torch.nn.Linear(4, 1)
        """)
    return head + textwrap.indent(textwrap.dedent(optimizer_lines), "    ") + LOOP


def _migrated(optimizer_lines: str):
    output, findings = migrate_text(_script(optimizer_lines))
    return output, [f.code for f in findings if f.needs_human]


def test_parameter_groups_from_a_helper_train_the_model_it_receives():
    output, refusals = _migrated("""\
        param_groups = add_weight_decay(model_without_ddp, 0.05)
        optimizer = torch.optim.AdamW(param_groups, lr=1e-3)
        """)
    assert refusals == [] and output is not None
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output


def test_an_optimizer_factory_handed_the_model_trains_it():
    output, refusals = _migrated("optimizer = create_optimizer(args, model)\n")
    assert refusals == [] and output is not None
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output


def test_a_factory_handed_two_models_the_loop_runs_trains_both():
    source = _script("optimizer = create_optimizer(args, model, head)\n")
    source = source.replace("mse_loss(model(x), y)", "mse_loss(head(model(x)), y)")
    output, findings = migrate_text(source)
    assert [f.code for f in findings if f.needs_human] == [] and output is not None
    assert "model, head, optimizer, loader = accelerator.prepare(" in output


def test_parameter_groups_of_two_models_from_one_helper_call_are_not_guessed():
    source = _script("optimizer = torch.optim.AdamW(add_weight_decay(model, head, 0.05))\n")
    source = source.replace("mse_loss(model(x), y)", "mse_loss(head(model(x)), y)")
    output, findings = migrate_text(source)
    assert output is None and [f.code for f in findings if f.needs_human] == ["MIG900"]


def test_a_helper_handed_a_model_the_loop_does_not_run_trains_the_one_it_runs():
    # `head` is built and handed over but never run: the optimizer trains `model`
    output, refusals = _migrated("optimizer = create_optimizer(args, model, head)\n")
    assert refusals == [] and output is not None
    assert "accelerator.prepare(model, optimizer, loader)" in output


def test_a_helper_handed_only_a_model_the_loop_does_not_run_is_not_guessed():
    output, refusals = _migrated("optimizer = torch.optim.AdamW(add_weight_decay(head, 0.05))\n")
    assert output is None and refusals == ["MIG900"]


def _file(name: str) -> ProgramFile:
    return ProgramFile(Path(name), b"x = 1\n", "x = 1\n", "utf-8", ast.parse("x = 1\n"))


def test_every_file_of_a_program_refused_in_a_helper_points_at_the_helper():
    files = [_file("main.py"), _file("engine.py"), _file("misc.py")]
    refusal = Finding(code="MIG900", message="could not tell", line=3)
    results = unchanged(files, [[], [refusal], []])
    notes = [[f.message for f in result.findings] for result in results]
    left = "the program of main.py (main.py, engine.py, misc.py) is left as it is: the MIG900"
    assert notes[1][0] == "could not tell" and notes[1][1].startswith(left)
    for number in (0, 2):  # the entry too: it has no finding of its own
        [message] = notes[number]
        assert "not migrated (see the finding in engine.py)" in message
    # a refusal in the entry is pointed at as before
    results = unchanged(files, [[refusal], [], []])
    assert next(f.message for f in results[0].findings) == "could not tell"
    assert [f.code for f in results[0].findings] == ["MIG900", "MIG950"]
    assert "(see the finding there)" in results[1].findings[0].message
