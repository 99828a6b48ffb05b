"""Training objects that first meet inside an `if` (small2 §2: train/test mode switches, a
conditional resume re-binding the objects) are prepared in each branch that uses them; the
Accelerator whose arguments read a value set inside `if __name__ == "__main__":` is made there
(with the module's device moved in). The golden fixtures branch_train_test_mode,
branch_conditional_resume and accelerator_in_main_guard hold the reviewed outputs; here the
exact prepare lines, the shapes that must still refuse (naming their lines), and 2-process
runs of the migrated fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, ROOT, without_batch_note


def _golden(name: str) -> str:
    output, _ = migrate_text((GOLDEN / f"{name}.in.py").read_text())
    assert output == (GOLDEN / f"{name}.out.py").read_text()
    return output


def _lines_around(output: str, text: str, before: int, after: int) -> list[str]:
    lines = output.splitlines()
    at = next(i for i, line in enumerate(lines) if text in line)
    return lines[at - before : at + after + 1]


def test_each_branch_of_a_mode_switch_prepares_what_it_uses():
    output = _golden("branch_train_test_mode")
    assert _lines_around(output, "optimizer, train_loader = accelerator.prepare(", 2, 2) == [
        "        train_loader = DataLoader(TensorDataset(*samples), batch_size=8, shuffle=False)",
        "",
        "        optimizer, train_loader = accelerator.prepare(optimizer, train_loader)",
        '        accelerator.print("batches per epoch:", len(train_loader))',
        "        for epoch in range(epochs):",
    ]  # fmt: skip
    assert _lines_around(output, "test_loader = accelerator.prepare(", 2, 1) == [
        "        test_loader = DataLoader(TensorDataset(*samples), batch_size=8)",
        "",
        "        test_loader = accelerator.prepare(test_loader)",
        "        accelerator.unwrap_model(model).load_state_dict(torch.load(weights))",
    ]
    assert _lines_around(output, "net = accelerator.prepare(net)", 2, 1) == [
        "    net = nn.Linear(4, 1)",
        "",
        "    net = accelerator.prepare(net)",
        '    run(net, samples, train=sys.argv[1:] != ["test"])',
    ]
    assert output.count("accelerator.prepare(") == 3


def test_a_conditional_resume_is_set_up_before_the_branch_prepare():
    output = _golden("branch_conditional_resume")
    assert _lines_around(output, "model, optimizer, train_loader, val_loader = acc", 4, 4) == [
        'if args.mode == "train":',
        "    if args.resume:",
        "        model, optimizer, start = restore(args.resume, model, optimizer)",
        "",
        "    model, optimizer, train_loader, val_loader = accelerator.prepare(",
        "        model, optimizer, train_loader, val_loader",
        "    )",
        "",
        "    for epoch in range(start, args.epochs):",
    ]
    assert _lines_around(output, "model, test_loader = accelerator.prepare(", 3, 1) == [
        "else:",
        '    model, optimizer, start = restore("last.pt", model, optimizer)',
        "",
        "    model, test_loader = accelerator.prepare(model, test_loader)",
        "    model.eval()",
    ]


def test_the_accelerator_is_made_in_the_main_guard_after_the_value_it_reads():
    output = _golden("accelerator_in_main_guard")
    assert "\ndevice = " not in output  # the module-level device line moved into the guard
    assert 'print_every = 2\nprint("setting up")\n' in output  # before the guard: a print
    assert _lines_around(output, "accelerator = Accelerator(", 3, 2) == [
        'if __name__ == "__main__":',
        "    torch.manual_seed(0)",
        "    accumulation_steps = 2",
        "    accelerator = Accelerator(gradient_accumulation_steps=accumulation_steps)",
        "    device = accelerator.device",
        "    loader = make_loader(64)",
    ]


# -- shapes that must still refuse, naming their lines ------------------------------------------

MODE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if train:
    loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
"""


def _refusal(source: str) -> str:
    output, findings = migrate_text(textwrap.dedent(source))
    assert output is None
    return " ".join(f.message for f in findings if f.code == "MIG900")


def test_a_forward_after_the_branches_refuses_naming_the_if():
    message = _refusal("train = True\n" + MODE + "print(model(torch.zeros(1, 2)))\n")
    assert "found `loader` defined at line 7 and used at line 8 (iterated), both inside the " \
           "`if` at line 6, and no branch of it has a point" in message  # fmt: skip


def test_a_loader_made_and_used_in_the_epoch_loop_names_the_loop():
    message = _refusal(MODE.replace("if train:", "for epoch in range(2):"))
    assert (
        "found `loader` defined at line 6 and used at line 7 (iterated), both inside the `for` "
        "at line 5: made and used in one loop"
    ) in message


GUARD = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
{before}
if __name__ == "__main__":
    steps = 2
    loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
    model = torch.nn.Linear(2, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)) / steps
        loss.backward()
        if (i + 1) % steps == 0:
            optimizer.step()
            optimizer.zero_grad()
{after}
"""


DEVICE_LINE = '`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` at line 3'


@pytest.mark.parametrize(
    "before, after, steps, user",
    [
        # the module reads the device itself
        ("zero = torch.zeros(1, device=device)", "", 6, DEVICE_LINE),
        # a function reads it
        ("def probe():\n    return torch.ones(1, device=device)", "", 7, DEVICE_LINE),
        # used after the guard: the first user inside the guard is named, with its `if`
        (
            "",
            "torch.save(model.state_dict(), 'm.pt')",
            6,
            (
                "`for i, (x, y) in enumerate(loader):` at line 10 (inside the `if` at line 5; "
                "the Accelerator is made outside it, for code there that needs it too)"
            ),
        ),
    ],
)
def test_the_guard_is_not_used_when_code_outside_it_needs_the_accelerator(
    before, after, steps, user
):
    output, findings = migrate_text(GUARD.format(before=before, after=after))
    assert output is None
    [refusal] = [f for f in findings if f.needs_human]
    assert refusal.message == (
        f"the Accelerator's gradient_accumulation_steps= reads `steps`, defined at line {steps}, "
        f"but {user} already uses the accelerator; migrate by hand"
    )


def test_without_a_value_from_the_guard_the_accelerator_opens_the_guard():
    # everything that needs it runs in the guard: it is the guard's first statement (not at
    # module level, where DataLoader workers started by spawn would make it again)
    output, findings = migrate_text(GUARD.format(before="", after="").replace(
        "if __name__", "steps = 2\nif __name__").replace("    steps = 2\n", ""))  # fmt: skip
    assert [f.code for f in findings if f.needs_human] == []
    assert (
        'if __name__ == "__main__":\n'
        "    accelerator = Accelerator(gradient_accumulation_steps=steps)\n"
        "    loader = DataLoader("
    ) in output
    assert "\ndevice = " not in output


# -- on 2 processes ----------------------------------------------------------------------------


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    return env


def _launch(tmp_path, script: str, *args: str) -> list[str]:
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", script, *args]
    done = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


@pytest.mark.slow
def test_branch_prepares_resume_train_and_test_on_two_processes(tmp_path):
    """One migrated script, three launches: training resumed from a checkpoint (the resume
    branch, then the training branch's prepare), the test branch on what it saved, and the
    guard fixture. The test loss equals one process's evaluation of the saved model."""
    import torch
    from torch import nn

    (tmp_path / "resume.py").write_text(_golden("branch_conditional_resume"))
    (tmp_path / "guard.py").write_text(_golden("accelerator_in_main_guard"))
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 1},
               tmp_path / "start.pt")  # fmt: skip
    lines = _launch(tmp_path, "resume.py", "--resume", "start.pt", "--epochs", "3")
    assert [line.split(" val")[0] for line in lines] == ["epoch 1", "epoch 2"]  # main only
    saved = torch.load(tmp_path / "last.pt")
    assert saved["epoch"] == 3
    tested = _launch(tmp_path, "resume.py", "--mode", "test")
    assert len(tested) == 1 and tested[0].startswith("test ")
    torch.manual_seed(0)
    features, targets = torch.randn(96, 6), torch.randn(96, 1)
    model.load_state_dict(saved["model"])
    with torch.no_grad():
        expected = nn.functional.mse_loss(model(features), targets).item()
    assert float(tested[0].split()[1]) == pytest.approx(expected, abs=1e-4)
    guarded = _launch(tmp_path, "guard.py")
    assert guarded.count("setting up") == 2  # a plain print before the Accelerator exists
    assert [line.split(" loss")[0] for line in guarded if line.startswith("epoch")] == ["epoch 0"]


def test_an_object_used_in_the_test_of_the_if_refuses():
    message = _refusal(
        "train = True\n" + MODE.replace("if train:", "if model(torch.ones(1, 2)) > 0:")
    )
    assert "both inside the `if` at line 6" in message


def test_an_elif_chain_prepares_per_branch_and_a_branch_that_only_prints_prepares_nothing():
    source = MODE.replace("if train:", 'if mode == "train":') + textwrap.dedent("""\
        elif mode == "test":
            test_loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)))
            with torch.no_grad():
                for x, y in test_loader:
                    print(model(x).sum().item())
        else:
            print(model)
        """)  # fmt: skip
    output, findings = migrate_text('mode = "train"\n' + source)
    # one note: the test branch prints each process's own outputs, the main process's shown
    assert [(f.code, f.line) for f in without_batch_note(findings)] == [("MIG953", 16)]
    lines = output.splitlines()
    prepares = [(i, line) for i, line in enumerate(lines) if "accelerator.prepare(" in line]
    assert [line for _i, line in prepares] == [
        "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)",
        "    model, test_loader = accelerator.prepare(model, test_loader)",
    ]
    assert lines[prepares[1][0] - 3] == 'elif mode == "test":'
    assert lines[-2:] == ["else:", "    accelerator.print(model)"]
