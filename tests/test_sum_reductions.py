"""MIG032/MIG031: the reduction a per-process sum takes follows how the program reads it
(rules/sum_reductions.py). A sum of batch losses read as it is (`print("Loss", total)`) is the
sum over every process's batches ("sum"); one divided by this process's batch count - through
`len()` of the loader or of the progress bar wrapping it, `total /= len(bar)`, `total.item() /
len(loader)` - is an average over batches ("mean"); reads of both kinds at once are left with
their note."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

EPOCHS = """\
import torch
import tqdm
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64,))), batch_size=8)
model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr={lr})
for epoch in range(2):
    {start}
    bar = tqdm.tqdm(loader, disable=True)
    for step, (x, y) in enumerate(bar):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += {increment}
    {reads}
"""


def _reduction(start: str, increment: str, reads: str) -> str | None:
    source = EPOCHS.format(lr="0.1", start=start, increment=increment, reads=reads)
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    found = re.search(r'total = accelerator\.reduce\(.*"(sum|mean)"\)', output)
    return found.group(1) if found else None


def test_a_sum_of_batch_losses_read_as_it_is_is_summed():
    for start, increment in (("total = 0", "loss.item()"), ("total = 0.0", "loss.detach().item()")):
        assert _reduction(start, increment, 'print("Loss", total)') == "sum"
        assert _reduction(start, increment, 'print("Loss", total / 100)') == "sum"


def test_a_sum_over_a_number_alike_on_every_process_is_summed():
    """`total / train_size` of a size computed before the loop scales the sum as `total /
    100` does: the sum over every process's batches over it is the original's quotient."""
    for start in ("train_size = 64\n    total = 0.0", "rows = [1] * 64\n    total = 0.0"):
        divisor = "train_size" if start.startswith("train_size") else "len(rows)"
        read = f'print("Loss", total / {divisor})'
        assert _reduction(start, "loss.item() * x.size(0)", read) == "sum", start
        assert _reduction(start, "loss.item()", read) == "sum", start


def test_a_sum_read_over_the_data_set_size_and_as_it_is_is_summed():
    """`print(total / len(loader.dataset))` and the sum kept as it is (h8 VAE: printed 1/N of
    the original's average loss): both read the sum over every process's batches."""
    for reads in (
        'print("Loss", total / len(loader.dataset))\n    history = [total]',
        'print("Loss", total / len(loader.dataset), "sum", total)',
    ):
        assert _reduction("total = 0.0", "loss.item()", reads) == "sum", reads


def test_a_sum_divided_by_this_processs_batch_count_is_averaged():
    reads = {
        "len of the bar": 'print("Loss", total / len(bar))',
        "len of the loader": 'print("Loss", total / len(loader))',
        "enumerate index": 'print("Loss", total / (step + 1))',
        "divided in place": 'total /= len(bar)\n    print("Loss", total)',
    }
    for case, read in reads.items():
        assert _reduction("total = 0.0", "loss.item()", read) == "mean", case
    tensor_sum = _reduction(
        "total = torch.zeros(1)", "loss.detach()", 'print("Loss", total.item() / len(loader))'
    )
    assert tensor_sum == "mean"
    added_averaged = _reduction("total = 0.0", "loss.item() / len(loader)", 'print("Loss", total)')
    assert added_averaged == "mean"


def test_reads_of_both_kinds_are_left_with_their_note():
    source = EPOCHS.format(
        lr="0.1", start="total = 0.0", increment="loss.item()",
        reads='print("sum", total, "mean", total / len(loader))',
    )  # fmt: skip
    output, findings = migrate_text(source)
    assert "total = accelerator.reduce(" not in output
    assert any(f.code == "MIG953" for f in findings)


def test_an_evaluation_averaged_over_the_bar_that_wraps_its_loader_takes_the_mean():
    source = EPOCHS.format(
        lr="0.1", start="total = 0.0", increment="loss.item()", reads='print("Loss", total)'
    ) + (
        "\n\ndef evaluate(model, dataloader):\n"
        "    bar = tqdm.tqdm(dataloader, disable=True)\n"
        "    loss_epoch = 0\n"
        "    for idx, (x, y) in enumerate(bar):\n"
        "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
        "        loss_epoch += loss.item()\n"
        "    loss_epoch /= len(bar)\n"
        "    return loss_epoch\n\n\n"
        "val_loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 3, (32,))),"
        " batch_size=8)\n"
        "print(evaluate(model, val_loader))\n"
    )
    output, _ = migrate_text(source)
    assert '        loss = accelerator.reduce(loss, "mean")\n' in output
    assert 'accelerator.reduce(loss, "sum")' not in output


def test_two_processes_print_the_one_process_sum_of_batch_losses(tmp_path):
    """lr=0: the model never changes; at the default batch (no split) the 8 batches of the
    epoch are shared 4 and 4, and their losses summed over both processes are the
    original's sum."""
    source = EPOCHS.format(
        lr="0.0", start="total = 0.0", increment="loss.item()",
        reads='print(f"Loss {total:.6f}")',
    )  # fmt: skip
    (tmp_path / "original.py").write_text(source)
    single = subprocess.run([sys.executable, "original.py"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, check=True)  # fmt: skip
    expected = [float(v) for v in re.findall(r"Loss ([\d.]+)", single.stdout)]
    assert len(expected) == 2
    output, _ = migrate_text(source)
    (tmp_path / "migrated.py").write_text(output)
    shown = [float(v) for v in re.findall(r"Loss ([\d.]+)", launch(tmp_path / "migrated.py",
                                                                    tmp_path).stdout)]  # fmt: skip
    assert len(shown) == 2
    assert all(abs(a - b) < 1e-4 for a, b in zip(shown, expected, strict=True)), (shown, expected)


EVALUATED = """\
import torch
from sklearn.metrics import mean_absolute_error
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
val_loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def test_model(model, loader):
    test_loss, test_mae, count = 0, 0, 0
    for x, y in loader:
        prediction = model(x)
        loss = torch.nn.functional.mse_loss(prediction, y)
        test_loss += loss
        mae = mean_absolute_error(y, prediction.detach().cpu())
        test_mae += mae
        count += 1
    return test_loss.detach().cpu().numpy() / count, test_mae / count


for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(test_model(model, val_loader))
"""


def test_a_score_a_host_library_returns_is_a_number_reduced_with_its_batch_mean():
    """`mean_absolute_error(...)` returns a float per batch: reduced as a number (never
    `gather_for_metrics`, which makes a list of it); the loss read as `test_loss.detach().
    cpu().numpy() / count` is an average over this process's batches: "mean"."""
    output, findings = migrate_text(EVALUATED)
    assert output is not None, [f.message for f in findings]
    assert '        loss = accelerator.reduce(loss, "mean")\n' in output
    assert (
        '        mae = accelerator.reduce(torch.tensor(mae, device=accelerator.device), "mean")'
        ".item()\n"
    ) in output
    assert "gather_for_metrics(mae)" not in output


def test_a_per_batch_number_reduced_in_an_evaluation_says_the_last_batches_are_evened_out():
    _output, findings = migrate_text(EVALUATED)
    notes = [f.message for f in findings if f.code == "MIG031" and "even_batches" in f.message]
    assert len(notes) == 1  # once for the loop, naming what it reduces
    assert notes[0].startswith("the per-batch numbers this loop reduces over the processes (`loss`")
    assert "gather_for_metrics" in notes[0]


DEEP = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, shuffle=True)


def reconstruction(out, x):
    return torch.nn.functional.mse_loss(out, x, reduction="sum")


def loss_function(out, x, mu):
    return reconstruction(out, x) + mu.pow(2).sum()


class AutoEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        return h, h.mean(dim=1)


def train(model, train_loader, optimizer, epoch):
    train_loss = 0
    for (x,) in train_loader:
        optimizer.zero_grad()
        out, mu = model(x)
        loss = loss_function(out, x, mu)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    print("epoch", epoch, "average", train_loss / len(train_loader.dataset))
    return train_loss


def start_train(model):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return [train(model, loader, optimizer, epoch) for epoch in range(2)]


def main():
    print(start_train(AutoEncoder()))


if __name__ == "__main__":
    main()
"""


def test_a_loss_computed_calls_deep_is_still_this_processs_share():
    """A loss helper reached four calls from the module (main -> start_train -> train ->
    loss_function -> reconstruction): past the depth the engine walks, a call counts what its
    arguments count, so the running sum of its losses is still this process's share and is
    reduced (h8 VAE printed 1/N of the average with no word)."""
    output, findings = migrate_text(DEEP)
    assert output is not None, [f.message for f in findings]
    assert (
        "    train_loss = accelerator.reduce(torch.tensor(train_loss, device=accelerator.device)"
        ', "sum").item()\n'
    ) in output


ALIASED_COUNT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
{before}
for epoch in range(2):
    total = 0.0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    {alias}
    print(f"epoch {{epoch}} loss {{total / nb:.4f}}")
"""


@pytest.mark.parametrize(
    ("before", "alias"),
    [
        ("", "nb = len(loader)"),
        ("", "nb = batches = len(loader)"),
        ("batches_per_epoch = len(loader)", "nb = batches_per_epoch"),
    ],
)
def test_a_batch_count_read_through_names_makes_a_mean(before, alias):
    """`nb = batches_per_epoch = len(loader)` (h12 re-review: a WGAN's epoch losses were left
    per process with a note): the prepared loader's length, read through names bound once
    after the prepare, is this process's batch count."""
    output, findings = migrate_text(ALIASED_COUNT.format(before=before, alias=alias))
    assert output is not None, [f.message for f in findings]
    assert (
        'total = accelerator.reduce(torch.tensor(total, device=accelerator.device), "mean")'
        in output
    )
