"""Training objects split between module level and a module-level function (issue 16,
function_homes.py): each is prepared in the scope that makes it, and the shapes where one
prepare per scope would be wrong are refused by name. The reviewed goldens
(fixtures/golden/module_*) run on two processes in test_function_homes_runs.py."""

from __future__ import annotations

import textwrap

from migrator.engine import migrate_text
from tests.test_class_objects import warnings

HEADER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

"""

LOADER = """\
data = TensorDataset(torch.randn(32, 3), torch.randn(32, 1))
loader = DataLoader(data, batch_size=4, shuffle=True)
"""

TRAIN = """\
def train():
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return model
"""


def migrate(body: str):
    return migrate_text(HEADER + textwrap.dedent(body))


def lines_of(output: str) -> list[str]:
    return output.splitlines()


def test_module_loader_read_by_the_function_that_makes_the_model():
    output, findings = migrate(LOADER + "\n\n" + TRAIN + "\n\nnet = train()\n")
    assert not warnings(findings)
    lines = lines_of(output)
    made = lines.index("loader = DataLoader(data, batch_size=4, shuffle=True)")
    assert lines[made + 1 : made + 3] == ["", "loader = accelerator.prepare(loader)"]
    optimizer = lines.index("    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)")
    assert lines[optimizer + 1 : optimizer + 3] == [
        "",
        "    model, optimizer = accelerator.prepare(model, optimizer)",
    ]
    assert lines.index("accelerator = Accelerator()") < made  # module level, before both
    assert "    return accelerator.unwrap_model(model)" in lines  # the caller gets the plain one
    assert output.count(".prepare(") == 2


def test_loaders_a_function_returns_to_module_level_are_prepared_there():
    output, findings = migrate(
        "def make_loaders():\n"
        "    data = TensorDataset(torch.randn(32, 3), torch.randn(32, 1))\n"
        "    return DataLoader(data, batch_size=4), DataLoader(data, batch_size=8)\n\n\n"
        "loader, spare = make_loaders()\n\n\n"
        + TRAIN
        + "\n\nif __name__ == '__main__':\n    train()\n"
    )
    assert not warnings(findings)
    lines = lines_of(output)
    made = lines.index("loader, spare = make_loaders()")
    assert lines[made + 2] == "loader = accelerator.prepare(loader)"
    assert "    model, optimizer = accelerator.prepare(model, optimizer)" in lines


def test_model_and_optimizer_at_module_level_loader_made_in_the_function():
    output, findings = migrate("""
        model = nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


        def fit():
            loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()


        fit()
    """)
    assert not warnings(findings)
    lines = lines_of(output)
    made = lines.index("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)")
    assert lines[made + 2] == "model, optimizer = accelerator.prepare(model, optimizer)"
    loader = lines.index("    loader = accelerator.prepare(loader)")
    assert made < loader < lines.index("fit()")


def test_module_level_model_trained_by_an_optimizer_made_in_the_function():
    output, findings = migrate(
        LOADER
        + """model = nn.Linear(3, 1)


        def train():
            optimizer = torch.optim.Adam(model.parameters())
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()


        train()
        """.replace("\n        ", "\n")
    )
    assert not warnings(findings)
    lines = lines_of(output)
    assert lines[lines.index("model = nn.Linear(3, 1)") + 2] == (
        "model, loader = accelerator.prepare(model, loader)"
    )
    made = lines.index("    optimizer = torch.optim.Adam(model.parameters())")
    assert lines[made + 2] == "    optimizer = accelerator.prepare(optimizer)"


def test_checkpoint_loaded_into_the_model_before_its_prepare_stays_plain():
    output, findings = migrate(
        LOADER
        + """

        def train(path):
            model = nn.Linear(3, 1)
            model.load_state_dict(torch.load(path))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
            torch.save(model.state_dict(), path)


        train("weights.pt")
        """.replace("\n        ", "\n")
    )
    assert not warnings(findings)
    lines = lines_of(output)
    assert "    model.load_state_dict(torch.load(path))" in lines  # before prepare: plain
    assert "    accelerator.save(accelerator.unwrap_model(model).state_dict(), path)" in lines


def test_a_function_rebinding_the_prepared_global_loader_is_refused_by_name():
    output, findings = migrate(
        LOADER
        + """

        def shrink():
            global loader
            loader = DataLoader(data, batch_size=2)


        """.replace("\n        ", "\n")
        + TRAIN
        + "\n\nshrink()\ntrain()\n"
    )
    assert output is None
    assert any(
        "`loader` is prepared at module level, and `shrink()` binds it at line 11 "
        "(declared global)" in m
        for m in warnings(findings)
    ), warnings(findings)


def test_module_code_calling_the_function_before_the_loader_is_prepared_is_refused():
    """`train()` runs once on the first loader, which is made again afterwards: a prepare
    after the last definition comes too late for the first call."""
    output, findings = migrate(
        LOADER + "\n\n" + TRAIN + "\n\ntrain()\nloader = DataLoader(data, batch_size=8)\ntrain()\n"
    )
    assert output is None
    assert any(
        "`loader` used at line 19 (by `train()`, which trains with it) before `loader` defined "
        "at line 20" in m
        for m in warnings(findings)
    ), warnings(findings)


def test_a_loader_made_again_after_a_driver_trains_is_refused():
    output, findings = migrate(
        LOADER
        + "\n\n"
        + TRAIN
        + "\n\ndef main():\n    train()\n\n\nmain()\nloader = DataLoader(data, batch_size=8)\nmain()\n"
    )
    assert output is None
    assert any(
        "`loader` is made again at line 24, after code that trains" in m for m in warnings(findings)
    ), warnings(findings)


def test_a_loader_made_per_fold_before_each_call_is_prepared_in_the_fold():
    """Every call of `train()` follows the fold's loader and its prepare: one new model and
    optimizer prepared per call, one loader per fold."""
    output, findings = migrate(
        "data = TensorDataset(torch.randn(32, 3), torch.randn(32, 1))\n\n\n"
        + TRAIN
        + "\n\nfor fold in range(2):\n    loader = DataLoader(data, batch_size=4 + fold)\n"
        "    train()\n"
    )
    assert not warnings(findings)
    assert output.endswith(
        "    loader = DataLoader(data, batch_size=4 + fold)\n\n"
        "    loader = accelerator.prepare(loader)\n    train()\n"
    )


def test_accelerator_arguments_read_in_the_function_while_module_code_prepares_are_refused():
    """The model is prepared at module level, so the Accelerator is made there; its
    mixed_precision comes from `args`, parsed inside `fit()`: no place can hold it."""
    output, findings = migrate("""
        import argparse

        model = nn.Linear(3, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


        def fit():
            parser = argparse.ArgumentParser()
            parser.add_argument("--amp", action="store_true")
            args = parser.parse_args()
            scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
            loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randn(8, 1)), batch_size=4)
            for x, y in loader:
                x, y = x.cuda(), y.cuda()
                optimizer.zero_grad()
                with torch.autocast("cuda", enabled=args.amp):
                    loss = nn.functional.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()


        fit()
    """)
    assert output is None
    assert any(
        "must be created at module level" in m and "read `args`, made in `fit()` (line 12)" in m
        for m in warnings(findings)
    ), warnings(findings)


def test_module_code_making_a_model_of_the_trained_name_after_training_stays_plain():
    """`model` in module code after `train()` is another network, loaded from what the main
    process saved: it keeps its `.to(device)` and waits for the save."""
    output, findings = migrate(
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        + LOADER
        + "\n\n"
        + TRAIN.replace("    return model\n", '    torch.save(model.state_dict(), "m.pt")\n')
        + "\n\ntrain()\nmodel = nn.Linear(3, 1).to(device)\n"
        'model.load_state_dict(torch.load("m.pt"))\n'
    )
    assert not warnings(findings)
    assert output.endswith(
        "train()\naccelerator.wait_for_everyone()\nmodel = nn.Linear(3, 1).to(device)\n"
        'model.load_state_dict(torch.load("m.pt"))\n'
    )


def test_one_optimizer_name_made_in_two_functions_is_refused_by_name():
    """Homes are found by name: two functions each making their own `optimizer` for the
    module-level model cannot both be prepared (and neither may be left plain)."""
    output, findings = migrate(
        LOADER
        + "model = nn.Linear(3, 1)\n\n\n"
        + "".join(
            f"def {name}():\n"
            f"    optimizer = torch.optim.{kind}(model.parameters())\n"
            "    for x, y in loader:\n"
            "        optimizer.zero_grad()\n"
            "        nn.functional.mse_loss(model(x), y).backward()\n"
            "        optimizer.step()\n\n\n"
            for name, kind in (("warmup", "SGD"), ("train", "Adam"))
        )
        + "warmup()\ntrain()\n"
    )
    assert output is None
    assert any(
        "one place that makes `optimizer`" in m
        and "in `warmup()` (line 10) and in `train()` (line 18)" in m
        for m in warnings(findings)
    ), warnings(findings)


def test_module_level_model_with_loader_and_optimizer_made_in_main():
    """The reverse with a helper: `main()` makes the loader and the optimizer and hands them
    to `train()` with the module-level model; the model is prepared at module level, where
    it is made, the rest in `main()`."""
    output, findings = migrate(
        "model = nn.Linear(3, 1)\n\n\n"
        "def train(net, batches, opt):\n"
        "    for x, y in batches:\n"
        "        opt.zero_grad()\n"
        "        nn.functional.mse_loss(net(x), y).backward()\n"
        "        opt.step()\n\n\n"
        "def main():\n"
        "    " + LOADER.splitlines()[0] + "\n"
        "    " + LOADER.splitlines()[1] + "\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    train(model, loader, optimizer)\n\n\n"
        "main()\n"
    )
    assert not warnings(findings)
    lines = lines_of(output)
    assert lines[lines.index("model = nn.Linear(3, 1)") + 2] == "model = accelerator.prepare(model)"
    made = lines.index("    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)")
    assert lines[made + 2] == "    optimizer, loader = accelerator.prepare(optimizer, loader)"


def test_model_made_under_the_main_guard_is_prepared_there():
    """Module code under `if __name__ == "__main__":` makes the model and hands it to
    `train()`, which makes the optimizer and the loader: the model is prepared in that
    block, after it is made and before the call."""
    output, findings = migrate(
        "def train(net):\n"
        "    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "    " + LOADER.splitlines()[0] + "\n"
        "    " + LOADER.splitlines()[1] + "\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        nn.functional.mse_loss(net(x), y).backward()\n"
        "        optimizer.step()\n\n\n"
        'if __name__ == "__main__":\n'
        "    model = nn.Linear(3, 1)\n"
        "    train(model)\n"
    )
    assert not warnings(findings)
    assert output.endswith(
        "    model = nn.Linear(3, 1)\n\n    model = accelerator.prepare(model)\n    train(model)\n"
    )
    assert "    optimizer, loader = accelerator.prepare(optimizer, loader)\n" in output


def test_function_reading_the_module_loader_and_receiving_the_model_prepares_both():
    """Three scopes: the loader at module level, the model made in `main()` and handed to
    `train()`, which makes the optimizer: the model and optimizer meet in `train()`."""
    output, findings = migrate(
        LOADER + "\n\n"
        "def train(model):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        nn.functional.mse_loss(model(x), y).backward()\n"
        "        optimizer.step()\n\n\n"
        "def main():\n"
        "    train(nn.Linear(3, 1))\n\n\n"
        "main()\n"
    )
    assert not warnings(findings)
    lines = lines_of(output)
    assert lines[lines.index("loader = DataLoader(data, batch_size=4, shuffle=True)") + 2] == (
        "loader = accelerator.prepare(loader)"
    )
    made = lines.index("    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)")
    assert lines[made + 2] == "    model, optimizer = accelerator.prepare(model, optimizer)"
    assert any("`train` now prepares `model`" in f.message for f in findings)


def test_model_from_an_enclosing_function_is_refused_naming_where_it_is_made():
    output, findings = migrate(
        "def main():\n"
        "    model = nn.Linear(3, 1)\n\n"
        "    def train():\n"
        "        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "        " + LOADER.splitlines()[0] + "\n"
        "        " + LOADER.splitlines()[1] + "\n"
        "        for x, y in loader:\n"
        "            optimizer.zero_grad()\n"
        "            nn.functional.mse_loss(model(x), y).backward()\n"
        "            optimizer.step()\n\n"
        "    train()\n"
    )
    assert output is None
    assert any(
        "`model` is made at line 6 in `main()` (line 5), not in `train()` (line 8), where the "
        "optimizer that trains it is made" in m
        for m in warnings(findings)
    ), warnings(findings)


def test_reverse_split_with_no_caller_in_this_file_prepares_at_import():
    """`main()` is called by a driver elsewhere: the module-level objects are prepared when
    the module is imported, the loader when `main()` runs."""
    output, findings = migrate(
        "model = nn.Linear(3, 1)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n\n\n"
        "def main():\n"
        "    " + LOADER.splitlines()[0] + "\n"
        "    " + LOADER.splitlines()[1] + "\n"
        "    for x, y in loader:\n"
        "        nn.functional.mse_loss(model(x), y).backward()\n"
        "        optimizer.step()\n"
    )
    assert not warnings(findings)
    lines = lines_of(output)
    assert lines[lines.index("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)") + 2] == (
        "model, optimizer = accelerator.prepare(model, optimizer)"
    )
    assert "    loader = accelerator.prepare(loader)" in lines


def test_one_optimizer_over_a_module_level_model_and_a_function_model():
    """Each model is prepared where it is made: `encoder` at module level with the loader,
    `head` with the optimizer in `train()`."""
    output, findings = migrate(
        LOADER + "encoder = nn.Linear(3, 4)\n\n\n"
        "def train():\n"
        "    head = nn.Linear(4, 1)\n"
        "    params = list(encoder.parameters()) + list(head.parameters())\n"
        "    optimizer = torch.optim.SGD(params, lr=0.1)\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        nn.functional.mse_loss(head(encoder(x)), y).backward()\n"
        "        optimizer.step()\n\n\n"
        "train()\n"
    )
    assert not warnings(findings)
    lines = lines_of(output)
    assert lines[lines.index("encoder = nn.Linear(3, 4)") + 2] == (
        "encoder, loader = accelerator.prepare(encoder, loader)"
    )
    made = lines.index("    optimizer = torch.optim.SGD(params, lr=0.1)")
    assert lines[made + 2] == "    head, optimizer = accelerator.prepare(head, optimizer)"


def test_module_prepared_model_is_unwrapped_before_the_functions_own_prepare():
    """In `train()`, before its `optimizer = accelerator.prepare(optimizer)`, the model is
    already the one prepared at module level: its own attributes go through unwrap_model."""
    output, findings = migrate(
        LOADER + "model = nn.Linear(3, 1)\n\n\n"
        "def train():\n"
        "    model.tag = 'run'\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        nn.functional.mse_loss(model(x), y).backward()\n"
        "        optimizer.step()\n\n\n"
        "train()\n"
    )
    assert not warnings(findings)
    assert "    accelerator.unwrap_model(model).tag = 'run'\n" in output
