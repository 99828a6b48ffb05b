"""Per-process values (SPEC §3b.3): the flow that says what a value counts on a process
(analysis/effects/values.py), MIG032's reductions of running sums and printed losses on the
migrated text, and the soundness check's refusals (MIG953)."""

from __future__ import annotations

import ast

import pytest

from migrator.analysis.effects.extents import CONST, GLOBAL, LOCAL, MIXED
from migrator.analysis.effects.values import PerProcessValues
from migrator.analysis.syntax.index import ModuleIndex
from migrator.engine import migrate_text
from migrator.soundness import check_output
from migrator.source import Source

MIGRATED_HEAD = """\
import torch
from torch.utils.data import DataLoader
from runtime import Accelerator

accelerator = Accelerator()
model, loader = accelerator.prepare(torch.nn.Linear(4, 2), DataLoader(data, batch_size=8))
"""


def extents(body: str, expression: str) -> set[str]:
    """What `expression` (the last statement's value, `probe = <expression>`) holds."""
    code = MIGRATED_HEAD + body + f"probe = {expression}\n"
    index = ModuleIndex(ast.parse(code), Source(code))
    values = PerProcessValues(index)
    probe = index.module_scope.assigns("probe")[-1].value
    return values.extents(probe, index.module_scope)


@pytest.mark.parametrize(
    "body, expression, expected",
    [
        ("", "len(loader)", LOCAL),
        ("", "len(loader.dataset)", GLOBAL),
        ("", "accelerator.num_processes", CONST),
        ("correct = 0\nfor x, y in loader:\n    correct += (model(x).argmax(1) == y).sum()\n",
         "correct", LOCAL),
        (("correct = 0\nfor x, y in loader:\n    out = model(x)\n"
         "    out, y = accelerator.gather_for_metrics((out, y))\n"
         "    correct += (out.argmax(1) == y).sum()\n"), "correct", GLOBAL),
        (("correct = 0\nseen = 0\nfor x, y in loader:\n    out = model(x)\n"
         "    out, y = accelerator.gather_for_metrics((out, y))\n"
         "    correct += (out.argmax(1) == y).sum()\n    seen += x.size(0)\n"),
         "correct / seen", MIXED),
        ("total = 0.0\nfor x, y in loader:\n    total += accelerator.reduce(model(x).sum())\n",
         "total / len(loader)", GLOBAL),
        (("total = torch.zeros(1)\nfor x, y in loader:\n    total += model(x).sum()\n"
         "total = accelerator.reduce(total)\n"),
         "total / (len(loader) * accelerator.num_processes)", GLOBAL),
        ("for i, (x, y) in enumerate(loader):\n    pass\n", "i", CONST),
        # a mean over the processes is alike everywhere, on one process's scale: over a
        # batch's size (a size every process's batch has) it is the original's number, no
        # mix; a sum over them is a whole-data count, mixed with the batch's size
        ("for x, y in loader:\n    loss = model(x).sum()\n",
         'accelerator.reduce(loss.detach(), "mean").item()', CONST),
        ("for x, y in loader:\n    loss = model(x).sum()\n",
         'accelerator.reduce(loss.detach(), "mean").item() / len(x)', LOCAL),
        ("for x, y in loader:\n    loss = model(x).sum()\n",
         'accelerator.reduce(loss, reduction="mean") / x.size(0)', LOCAL),
        ("for x, y in loader:\n    loss = model(x).sum()\n",
         "accelerator.reduce(loss).item() / len(x)", MIXED),
        ("for x, y in loader:\n    loss = model(x).sum()\n",
         'accelerator.reduce(loss, "sum") / len(x)', MIXED),
    ],
)  # fmt: skip
def test_what_a_value_counts(body, expression, expected):
    assert extents(body, expression) == {expected}


def test_a_helper_is_read_with_each_call_s_arguments():
    """`run_epoch(train_loader)` counts a share, `run_epoch(plain_loader)` the whole set."""
    body = (
        "def run_epoch(dl):\n    total = 0.0\n    for x, y in dl:\n"
        "        total += model(x).sum().item()\n    return total\n\n"
        "plain = DataLoader(data, batch_size=8)\n"
        "shared = run_epoch(loader)\n"
    )
    assert extents(body, "run_epoch(plain)") == {CONST}
    assert extents(body, "shared") == {LOCAL}


TRAINING = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=8)
    test_loader = DataLoader(data, batch_size=8)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        running_loss = 0.0
        seen = 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            seen += y.size(0)
{after}


main()
"""


@pytest.mark.parametrize(
    "after, reduced",
    [
        ("        print(f'epoch {epoch} loss {running_loss / len(loader):.4f}')",
         [('running_loss = accelerator.reduce(torch.tensor(running_loss, '
          'device=accelerator.device), "mean").item()')]),
        ("        print(f'epoch {epoch} seen {seen}')",
         [('seen = accelerator.reduce(torch.tensor(seen, device=accelerator.device), '
          '"sum").item()')]),
        ("        print(f'epoch {epoch} last loss {loss.item():.4f}')",
         ['{accelerator.reduce(loss.detach(), "mean").item():.4f}']),
    ],
)  # fmt: skip
def test_per_process_outputs_are_reduced_after_the_loop(after, reduced):
    output, findings = migrate_text(TRAINING.format(after=after))
    assert output is not None, findings
    for line in reduced:
        assert line in output
    assert not [f for f in check_output(output) if f.needs_human]


def test_a_count_of_passes_is_left_to_each_process():
    """With split batches every process makes as many passes as the original: `steps`
    printed per process is the original's number; summed it would be N times it."""
    after = "        print(f'epoch {epoch} steps {steps}')"
    source = TRAINING.replace("        seen = 0\n", "        seen = 0\n        steps = 0\n")
    source = source.replace("            seen += y.size(0)\n", "            steps += 1\n")
    output, _ = migrate_text(source.format(after=after))
    assert "steps = accelerator.reduce" not in output


def test_a_reduction_in_a_branch_only_some_processes_take_is_not_made():
    after = "        if accelerator_flag:\n            print(loss.item())"
    source = TRAINING.replace("def main():\n", "def main(accelerator_flag=True):\n")
    output, _ = migrate_text(source.format(after=after))
    assert ".reduce(loss" in output  # a same-everywhere test: every process reaches it
    guarded = TRAINING.format(after="        if loss.item() > 1:\n            print(loss.item())")
    output, _findings = migrate_text(guarded)
    assert output is None or ".reduce(loss" not in output


@pytest.mark.parametrize(
    "migrated, message",
    [
        (("correct = 0\nseen = 0\nfor x, y in loader:\n    out = model(x)\n"
         "    out, y2 = accelerator.gather_for_metrics((out, y))\n"
         "    correct += (out.argmax(1) == y2).sum().item()\n    seen += y.size(0)\n"
         "accelerator.print(correct / seen)\n"), "mixes this process's share"),
        (("best = 1e9\nfor epoch in range(3):\n    total = 0.0\n    for x, y in loader:\n"
         "        total += model(x).sum().item()\n    if total > best:\n        break\n"),
         "decides on this process's value"),
        (("for x, y in loader:\n    x, y = accelerator.gather_for_metrics((x, y))\n"
         "    out = model(x)\n"), "runs the prepared model on gathered inputs"),
    ],
)  # fmt: skip
def test_the_check_refuses_what_stays_mixed_or_decided_per_process(migrated, message):
    findings = [f for f in check_output(MIGRATED_HEAD + migrated) if f.code == "MIG953"]
    assert findings and message in findings[0].message


def test_the_mnist_progress_line_over_a_batch_size_migrates():
    """pytorch/examples' progress line: samples seen and the dataset's size side by side, the
    loss over the batch's size. The shown loss becomes the mean over the processes over the
    batch size (the original's scale): nothing mixes a share with the whole; not refused."""
    source = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(96, 4), torch.randint(0, 2, (96,)))
train_loader = DataLoader(data, batch_size=16, shuffle=True)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(1, 3):
    for batch_idx, (x, y) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if batch_idx % 2 == 0:
            print("Epoch {} [{}/{} ({:.0f}%)] Loss: {:.6f}".format(
                epoch, batch_idx * len(x), len(train_loader.dataset),
                100.0 * batch_idx / len(train_loader), loss.item() / len(x)))
"""
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert 'accelerator.reduce(loss.detach(), "mean").item() / len(x)' in output
    assert not [f for f in findings if f.code == "MIG953"], [f.message for f in findings]


GLOBAL_LOADER = """\
import torch
from runtime import Accelerator
from torch.utils.data import DataLoader, TensorDataset

accelerator = Accelerator()


class Checker:
    def baseline(self):
        return [x for x, _ in loader]


def total():
    return sum(x.sum() for x, _ in loader)


loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=4)
{between}
loader = accelerator.prepare(loader)
print(total())
"""


@pytest.mark.parametrize(
    ("between", "prepared_only"),
    [
        ("size = len(loader.dataset)", True),  # a library call: no code of this module runs
        ("print(total())", False),  # a function of the module reads the plain loader first
        ("checker = Checker()\nchecker.baseline()", False),  # so does a method of its class
    ],
)
def test_a_module_global_is_read_prepared_only_where_nothing_of_the_module_ran_before(
    between, prepared_only
):
    source = GLOBAL_LOADER.format(between=between)
    index = ModuleIndex(ast.parse(source), Source(source))
    values = PerProcessValues(index)
    found = values._prepared_global("loader")
    assert (found is not None) == prepared_only
    if prepared_only:
        assert "loader" in found.roles and "plainloader" not in found.roles
