"""MIG032 on training loops: a running sum over a prepared loader, zeroed before the loop and
read after it, is all-reduced right after the loop, so what is computed from it is the whole
data's on every process, not this process's share: `"sum"` for sums over samples (`loss.item()
* x.size(0)`, correct counts), whatever divides them. A sum carrying a value from before the
loop, or rebound in it, is not a running sum and is left."""

from __future__ import annotations

import re
import subprocess
import sys

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

TEMPLATE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
train_set = TensorDataset(torch.randn(32, 3), torch.randint(0, 2, (32,)))
sizes = {{"train": len(train_set)}}
model = torch.nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr={lr})
train_loader = DataLoader(train_set, batch_size=4)
for epoch in range(2):
    running_loss = 0.0
    running_corrects = 0
    for x, y in train_loader:
        optimizer.zero_grad()
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        running_loss += loss.item() * x.size(0)
        running_corrects += torch.sum(out.argmax(1) == y.data)
    epoch_loss = running_loss / {divisor}
    epoch_acc = running_corrects.double() / len(train_set)
    print(f"epoch {{epoch}} loss {{epoch_loss:.6f}} acc {{epoch_acc:.6f}}")
"""

LOSS_REDUCED = (
    "        running_corrects += torch.sum(out.argmax(1) == y.data)\n"
    "    running_loss = accelerator.reduce(torch.tensor(running_loss, "
    'device=accelerator.device), "sum").item()\n'
)
CORRECTS_REDUCED = (
    "    running_corrects = accelerator.reduce(torch.as_tensor(running_corrects, "
    'device=accelerator.device), "sum")\n'
)


def _migrate(divisor: str, lr: str = "0.1") -> str:
    output, findings = migrate_text(TEMPLATE.format(divisor=divisor, lr=lr))
    assert output is not None, [f.message for f in findings]
    return output


def test_a_number_and_a_tensor_divided_by_the_dataset_are_reduced_after_the_loop():
    output = _migrate("len(train_loader.dataset)")
    assert LOSS_REDUCED + CORRECTS_REDUCED + "    epoch_loss = running_loss / " in output
    assert output.count("accelerator.reduce(") == 2


def test_a_dict_of_dataset_lengths_is_the_whole_dataset():
    output = _migrate('sizes["train"]')
    assert LOSS_REDUCED + CORRECTS_REDUCED in output


def test_a_sum_over_samples_divided_by_the_batch_count_is_summed_too():
    """With split batches each process makes the original's passes over half of each batch:
    the summed losses over the passes the original made are the original's."""
    output = _migrate("len(train_loader)")
    assert LOSS_REDUCED + CORRECTS_REDUCED in output


def test_a_sum_not_zeroed_before_the_loop_is_not_touched():
    source = TEMPLATE.format(divisor="len(train_loader)", lr="0.1").replace(
        "    running_loss = 0.0\n", "    running_loss = float(epoch)\n"
    )
    output, _ = migrate_text(source)
    assert output is not None
    assert "running_loss = accelerator.reduce(" not in output
    assert CORRECTS_REDUCED in output


def test_a_sum_left_per_process_over_the_whole_data_set_is_refused():
    # not zeroed, so not reduced; over `len(train_set)` (the whole set's count) the printed
    # loss would be off by the number of processes
    source = TEMPLATE.format(divisor="len(train_set)", lr="0.1").replace(
        "    running_loss = 0.0\n", "    running_loss = float(epoch)\n"
    )
    output, findings = migrate_text(source)
    assert output is None
    assert any(f.code == "MIG953" and "mixes this process's share" in f.message for f in findings)


def test_sums_zeroed_together_in_one_statement_are_running_sums():
    zeroed = "    running_loss = 0.0\n    running_corrects = 0\n"
    for spelling in (
        "    running_loss, running_corrects = 0.0, 0\n",
        "    [running_loss, running_corrects] = [0.0, 0]\n",
        "    running_loss = running_corrects = 0\n",
        "    (running_loss, running_corrects) = (torch.tensor(0.0), torch.zeros(()))\n",
    ):
        source = TEMPLATE.format(divisor="len(train_set)", lr="0.1").replace(zeroed, spelling)
        output, _ = migrate_text(source)
        assert output is not None, spelling
        assert "    running_loss = accelerator.reduce(" in output, spelling
        assert "    running_corrects = accelerator.reduce(" in output, spelling


def test_a_sum_zeroed_with_a_value_carried_in_is_not_a_running_sum():
    source = TEMPLATE.format(divisor="len(train_loader)", lr="0.1").replace(
        "    running_loss = 0.0\n    running_corrects = 0\n",
        "    running_loss, running_corrects = float(epoch), 0\n",
    )
    output, _ = migrate_text(source)
    assert output is not None
    assert "running_loss = accelerator.reduce(" not in output
    assert CORRECTS_REDUCED in output


def test_a_sum_rebound_in_the_loop_is_not_touched():
    source = TEMPLATE.format(divisor="len(train_loader)", lr="0.1").replace(
        "        running_loss += loss.item() * x.size(0)\n",
        "        running_loss += loss.item() * x.size(0)\n        running_loss = running_loss\n",
    )
    output, _ = migrate_text(source)
    assert output is not None
    assert "running_loss = accelerator.reduce(" not in output


def test_a_numpy_sum_goes_through_a_tensor_on_the_device():
    source = (
        TEMPLATE.format(divisor="len(train_set)", lr="0.1")
        .replace("torch.sum(out.argmax(1) == y.data)", "np.sum(out.argmax(1).numpy() == y.numpy())")
        .replace("import torch\n", "import numpy as np\nimport torch\n")
    )
    output, _ = migrate_text(source)
    assert output is not None
    assert CORRECTS_REDUCED in output
    assert "running_loss = accelerator.reduce(" in output


def _epochs(text: str) -> list[tuple[float, float]]:
    found = re.findall(r"^epoch \d loss ([\d.]+) acc ([\d.]+)$", text, re.MULTILINE)
    return [(float(loss), float(acc)) for loss, acc in found]


def test_two_processes_print_the_one_process_epoch_values(tmp_path):
    # lr=0: the model never changes, so an epoch's summed loss does not depend on how the
    # samples are split; 32 samples in batches of 4 split evenly, nothing is repeated
    source = TEMPLATE.format(divisor="len(train_loader.dataset)", lr="0.0")
    original = tmp_path / "original.py"
    original.write_text(source)
    single = subprocess.run([sys.executable, str(original)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, check=True)  # fmt: skip
    expected = _epochs(single.stdout)
    assert len(expected) == 2

    script = tmp_path / "migrated.py"
    script.write_text(migrate_text(source)[0])
    printed = _epochs(launch(script, tmp_path).stdout)
    assert printed, "no epoch line printed"
    for loss, acc in printed:  # the main process prints, both epochs alike (lr=0)
        assert abs(loss - expected[0][0]) < 1e-5 and abs(acc - expected[0][1]) < 1e-9, (
            printed,
            expected,
        )


SHARED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def run_epoch(model, loader, optimizer=None):
    total = 0.0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total += loss.item() * len(x)
    return total


torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
check_loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randn(8, 1)), batch_size=4)
for epoch in range(2):
    print(run_epoch(model, train_loader, optimizer), run_epoch(model, {check}))
"""


def test_a_loop_also_run_over_a_plain_loader_keeps_its_sums():
    # one epoch function for training (prepared loader) and a check loop the tool leaves
    # plain: a reduce there would count the plain loader's whole set once per process
    output, findings = migrate_text(SHARED.format(check="check_loader"))
    assert output is not None
    assert "total = accelerator.reduce(" not in output
    assert "MIG953" in [f.code for f in findings]  # the printed train sum stays per process


OWN_DATASET = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 4)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


def loss_fn(out, x):
    return torch.nn.functional.mse_loss(out, x, reduction="sum")


dataset = {made}
loader = DataLoader(dataset, batch_size=8, shuffle=True)
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    total_loss = 0
    for x in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), x)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    print(f"Epoch {{epoch + 1}}, Loss: {{total_loss / len(dataset):.4f}}")
"""


def test_a_sum_over_the_programs_own_data_set_is_summed():
    # `len(dataset)` of a Dataset the program defines (or torch's) counts the whole set, so
    # the per-batch sums (`reduction="sum"` inside a helper) add up over the processes
    for made in ("Rows(64)", "torch.utils.data.TensorDataset(torch.randn(64, 4))"):
        output, _ = migrate_text(OWN_DATASET.format(made=made))
        assert output is not None
        assert (
            "    total_loss = accelerator.reduce(torch.tensor(total_loss, "
            'device=accelerator.device), "sum").item()\n'
        ) in output, made


def test_a_per_batch_loss_divided_as_it_is_added_is_averaged():
    # `loss.item() / len(loader)` adds a batch average scaled by this process's batch count:
    # the epoch's mean loss on each process, whose mean over the processes is the whole's
    source = TEMPLATE.format(divisor="1", lr="0.1").replace(
        "        running_loss += loss.item() * x.size(0)\n",
        "        running_loss += loss.item() / len(train_loader)\n",
    )
    output, _ = migrate_text(source)
    assert output is not None
    assert (
        "    running_loss = accelerator.reduce(torch.tensor(running_loss, "
        'device=accelerator.device), "mean").item()\n'
    ) in output
