"""What a migrated program shows (SPEC §3b.3, §3b.8): MIG953 says a value is this process's
own only where a value of the data reaches an output unreduced, by what names are bound to,
not by how they are spelled:

- a parameter the body rebinds later holds, where it is printed, what the callers pass (a
  string `loss="mse"`), not the loss the loop binds to the same name;
- `torch.log(x)`, `np.log(x)`, `math.log(x)` are functions of modules, not loggers: a term of
  a loss that is reduced before it is shown is not shown;
- a loader wrapped by a name (`bar = tqdm(loader)`, `batches = enumerate(loader)`) still
  yields this process's batches, through a loss function handed in as a parameter too;
- a loader a function receives from callers elsewhere is a prepared loader once it is
  prepared there: what is summed from it is reduced (MIG032), what a helper returns from it
  and another prints is noted.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch


def migrate(source: str) -> tuple[str, list]:
    output, findings = migrate_text(textwrap.dedent(source))
    assert output is not None, [f.message for f in findings]
    return output, findings


def shown(findings, line: int | None = None) -> list:
    return [f for f in findings if f.code == "MIG953" and (line is None or f.line == line)]


REBOUND_PARAMETER = """\
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader


    def fit(network, dataset, batch_size=4, epochs=2, {param}="mse"):
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
        optimizer = torch.optim.Adam(network.parameters(), lr=1e-3)
        {show}
        for epoch in range(epochs):
            for x, y in loader:
                {param} = F.mse_loss(network(x), y)
                optimizer.zero_grad()
                {param}.backward()
                optimizer.step()
    {caller}
"""


@pytest.mark.parametrize("param", ["loss", "criterion"])
@pytest.mark.parametrize(
    "show",
    [
        'print(f"[info] using {param} {{{param}}}")',
        'print("[info] using", {param})',
        'if {param}:\n            print("[info]", {param}, "loss")',
    ],
)
@pytest.mark.parametrize(
    "caller",
    ["", "\n\n    fit(torch.nn.Linear(3, 1), [(torch.randn(3), torch.randn(1))] * 8)\n"],
)
def test_a_parameter_rebound_later_shows_what_the_callers_pass(param, show, caller):
    source = REBOUND_PARAMETER.format(param=param, show=show.format(param=param), caller=caller)
    _output, findings = migrate(source)
    assert not shown(findings), [f.message for f in findings]


MODULE_FUNCTIONS = """\
    {extra}import math

    import numpy as np
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        losses = []
        for x, y in loader:
            out = model(x)
            mean, std = out[:, :1], out[:, 1:].abs() + 1
            kl = torch.mean(std ** 2 + mean ** 2 - 1 - {log}(std ** 2))
            loss = torch.nn.functional.mse_loss(mean, y) + 0.1 * kl * math.log(2.0)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {{epoch}} loss {{np.mean(losses):.4f}}")
"""


@pytest.mark.parametrize(
    "log, extra",
    [("torch.log", ""), ("torch.Tensor.log", ""), ("th.log", "import torch as th\n    ")],
)
def test_a_module_s_log_function_is_no_output(log, extra):
    output, findings = migrate(MODULE_FUNCTIONS.format(log=log, extra=extra))
    assert not shown(findings), [f.message for f in findings]
    # the loss shown later is reduced before it is kept; the term inside it is left alone
    assert 'losses.append(accelerator.reduce(loss.detach(), "mean").item())' in output
    assert f"{log}(std ** 2)" in output


@pytest.mark.parametrize(
    "show",
    [
        'logging.info("epoch %d loss %.4f", epoch, total)',
        'logger.info(f"epoch {epoch} loss {total:.4f}")',
        'wandb.log({"loss": total})',
    ],
)
def test_loggers_and_trackers_show_what_they_are_given(show):
    """The same per-process running sum, shown through a module's logging function, a logger
    object or a tracker: reduced over the processes before it is shown; read as it is (the
    sum of the epoch's batch losses), the sum over every process's batches."""
    source = f"""\
        import logging

        import torch
        import wandb
        from torch.utils.data import DataLoader, TensorDataset

        logger = logging.getLogger(__name__)
        loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            total = 0.0
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item()
            {show}
    """
    output, _findings = migrate(source)
    reduced = 'total = accelerator.reduce(torch.tensor(total, device=accelerator.device), "sum")'
    assert reduced in output


WRAPPED = """\
    import itertools

    import torch
    from torch.utils.data import DataLoader, TensorDataset
    from tqdm import tqdm


    def train(net, opt, loss_fun, data):
        batches = {wrap}
        for epoch in range(2):
            for {target} in batches:
                pred = net(x)
                loss_val = loss_fun(pred, y)
                {show}
                opt.zero_grad()
                loss_val.backward()
                opt.step()


    net = torch.nn.Linear(3, 1)
    opt = torch.optim.Adam(params=net.parameters(), lr=1e-3)
    data = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)

    if __name__ == "__main__":
        train(net, opt, torch.nn.L1Loss(), data)
"""


@pytest.mark.parametrize(
    "wrap, target",
    [
        ("tqdm(data)", "x, y"),
        ('tqdm(data, desc="train", unit="batch")', "x, y"),
        ("enumerate(data)", "idx, (x, y)"),
        ("enumerate(tqdm(data))", "idx, (x, y)"),
    ],
)
@pytest.mark.parametrize("show", ["print(loss_val)", 'print("loss", loss_val.detach())'])
def test_a_loader_wrapped_by_a_name_yields_this_process_s_batches(wrap, target, show):
    source = WRAPPED.format(wrap=wrap, target=target, show=show)
    _output, findings = migrate(source)
    notes = shown(findings)
    assert len(notes) == 1 and "loss_val" in notes[0].message, [f.message for f in findings]


def test_a_printed_value_not_from_the_data_is_not_noted_through_a_wrapper():
    source = WRAPPED.format(
        wrap="tqdm(data)", target="x, y", show='print("lr", opt.param_groups[0]["lr"])'
    )
    _output, findings = migrate(source)
    assert not shown(findings), [f.message for f in findings]


RETURNED_METRICS = """\
    import torch
    from tqdm import tqdm


    def one_epoch(model, loader, optimizer=None):
        total, correct, seen = 0.0, 0, 0
        bar = {bar}
        for x, y in bar:
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            if optimizer is not None:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            total += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            seen += len(y)
        return {{"loss": total / seen, "accuracy": correct / seen}}


    def report(name, metrics):
        print(f"{{name}}: loss {{metrics['loss']:.4f}} accuracy {{metrics['accuracy']:.3f}}")


    def train_model(model, train_loader, epochs=2, lr=0.1):
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        history = []
        for epoch in range(epochs):
            train_metrics = one_epoch(model, train_loader, optimizer)
            report("train", train_metrics)
            history.append(train_metrics)
        return history
"""


@pytest.mark.parametrize("bar", ["tqdm(loader)", 'tqdm(loader, desc="epoch", unit="batch")'])
def test_metrics_a_helper_returns_from_a_received_loader_are_reduced_before_shown(bar):
    """`train_model` receives its loader from callers elsewhere and prepares it: the sums
    `one_epoch` zeroes together (`total, correct, seen = 0.0, 0, 0`) over its batches are
    reduced after the loop (MIG032), so the dict `report` shows is the whole data's: no note."""
    output, findings = migrate(RETURNED_METRICS.format(bar=bar))
    assert "model, optimizer, train_loader = accelerator.prepare(" in output
    for name in ("total", "correct", "seen"):
        assert f"    {name} = accelerator.reduce(torch.tensor({name}, " in output, name
    assert not shown(findings), [f.message for f in findings]


RECEIVED = """\
import torch
from torch import nn


def fit(model, loader, epochs=2, lr=0.0):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(epochs):
        running = 0.0
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
        print(f"epoch {epoch} loss {running / len(loader):.6f}")
"""

DRIVER = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from fit_lib import fit

torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 3), torch.randn(32, 1))
fit(torch.nn.Linear(3, 1), DataLoader(data, batch_size=4))
"""


def test_a_received_loader_s_running_sum_is_reduced():
    output, findings = migrate(RECEIVED)
    assert (
        'running = accelerator.reduce(torch.tensor(running, device=accelerator.device), "mean")'
        in output
    )
    assert not shown(findings)


@pytest.mark.slow
def test_a_received_loader_s_mean_loss_is_the_one_process_number_on_two(tmp_path):
    """lr=0: the model never moves, so the epoch's mean batch loss does not depend on how the
    batches are dealt out; 32 samples in batches of 4 split evenly over 2 processes."""
    (tmp_path / "fit_lib.py").write_text(RECEIVED)
    (tmp_path / "driver.py").write_text(DRIVER)
    single = subprocess.run([sys.executable, "driver.py"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, check=True)  # fmt: skip
    expected = re.findall(r"^epoch \d loss ([\d.]+)$", single.stdout, re.MULTILINE)
    assert len(expected) == 2
    (tmp_path / "fit_lib.py").write_text(migrate(RECEIVED)[0])
    printed = re.findall(r"^epoch \d loss ([\d.]+)$", launch(tmp_path / "driver.py", tmp_path).stdout,
                         re.MULTILINE)  # fmt: skip
    assert printed == expected


RESUMED = """\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    import checkpoints


    def main():
        loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        {resume}
        for epoch in range(start, 4):
            print(f"beginning epoch {{epoch}}")
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


    main()
"""


@pytest.mark.parametrize(
    "resume",
    [
        'state = checkpoints.load("last.pt", model, optimizer)\n        start = state["epoch"]',
        'start = checkpoints.restore(model, "last.pt")',
    ],
)
def test_a_module_function_handed_the_model_counts_no_data(resume):
    """`checkpoints.load(path, model)` may take the prepared model (or a loader): what it
    returns is no share of the data, so the epoch it resumes from is the same everywhere."""
    output, findings = migrate(RESUMED.format(resume=resume))
    assert not shown(findings), [f.message for f in findings]
    assert 'accelerator.print(f"beginning epoch {epoch}")' in output


def test_a_main_process_helper_reading_the_model_s_parameters_runs_no_forward():
    """`model.named_parameters()` in a helper the main process alone runs is no collective:
    only a forward (`model(x)`, `model.forward(x)`) waits for every process."""
    source = """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from torch.utils.tensorboard import SummaryWriter


        def log_weights(writer, model, step):
            for name, value in model.named_parameters():
                writer.add_histogram(name, value, step)


        def main():
            loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
            model = torch.nn.Linear(3, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            writer = SummaryWriter("runs")
            for epoch in range(2):
                for x, y in loader:
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                log_weights(writer, model, epoch)


        main()
    """
    output, findings = migrate(source)
    assert "        if accelerator.is_main_process:\n            log_weights(" in output
    assert not [f for f in findings if f.needs_human]


def test_a_main_process_forward_is_still_refused():
    source = """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset


        def main():
            loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
            model = torch.nn.Linear(3, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(2):
                for x, y in loader:
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                if epoch == 1:
                    {call}


        main()
    """
    from migrator.soundness import check_output

    for call in ("print(model.forward(torch.ones(1, 3)))", "print(model(torch.ones(1, 3)))"):
        output, _ = migrate(source.format(call=call))
        assert not [f for f in check_output(output) if f.needs_human]
        guarded = output.replace(
            "        if epoch == 1:", "        if accelerator.is_main_process:"
        )
        assert guarded != output
        assert [f.code for f in check_output(guarded) if f.needs_human] == ["MIG953"], call


def test_a_batchs_shape_shown_is_no_share_of_the_data():
    """`x.shape`, `x.size(0)`, `len(y)` of a prepared loader's batch are the original's batch
    size at the default (unsplit) batch: nothing to reduce, no note (a torch.Size cannot be
    reduced anyway)."""
    source = """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step, (x, y) in enumerate(loader):
            if step == 0:
                print("batch", x.shape, x.size(0), len(y))
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print("loss", loss)
    """
    output, findings = migrate(source)
    notes = [f.message for f in findings if f.code == "MIG953"]
    assert len(notes) == 1 and notes[0].startswith("`loss` shown here"), notes
    assert 'accelerator.print("batch", x.shape, x.size(0), len(y))' in output


NAMED_PART = """\
    import random

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        total = 0.0
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        last = loss.detach().abs().max().item()
        {show}
"""


@pytest.mark.parametrize(
    "show",
    [
        'print(f"epoch {epoch}: mean {total / len(loader):.3f}, largest {last:.3f}")',
        'print("epoch {}: mean {:.3f}, largest {:.3f}".format(epoch, total / len(loader), last))',
    ],
)
def test_the_note_names_the_part_of_a_shown_string_that_stays_per_process(show):
    """The mean is reduced (MIG032), the epoch is alike everywhere: the note quotes `last`, the
    one part that stays this process's, and says how to make it the 1-process number."""
    _output, findings = migrate(NAMED_PART.format(show=show))
    notes = shown(findings)
    assert len(notes) == 1, [f.message for f in findings]
    assert notes[0].message.startswith("`last` shown here is this process's own value")
    assert "accelerator.reduce(...)" in notes[0].message
    assert "gather_object" in notes[0].message
