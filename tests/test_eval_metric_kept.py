"""MIG031 where a gather in place would be wrong (small2 survey): a loss unpacked from a model's
outputs and read with `.item()`, Python sets of spans, a batch still read after the metric,
and the throw-away `_`. Each is reduced where it stands, or named in a finding."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.fixtures import without_batch_note, without_padding_note

TEMPLATE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        logits = self.linear(x)
        return torch.nn.functional.cross_entropy(logits, y), logits


model = Scorer()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,)))
loader = DataLoader(data, batch_size=4)
for x, y in loader:
    loss, _ = model(x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
total_loss = hits = found = 0
losses = []
with torch.no_grad():
    for i, (x, y) in enumerate(loader):
        outputs = model(x, y)
{body}
print(total_loss, hits, found)
"""


def _migrate(body: str) -> tuple[str, list]:
    output, findings = migrate_text(TEMPLATE.format(body=body))
    assert output is not None
    return output, findings


def test_a_loss_unpacked_from_outputs_and_itemised_is_reduced_not_gathered():
    output, findings = _migrate(
        "        loss, logits = outputs[:2]\n"
        "        predicted = logits.argmax(dim=1)\n"
        "        total_loss += loss.item()\n"
        "        hits += (predicted == y).sum().item()\n"
        "    total_loss /= len(loader)\n"
    )
    assert (
        "        predicted = logits.argmax(dim=1)\n"
        '        loss = accelerator.reduce(loss, "mean")\n'
        "        total_loss += loss.item()\n"
        "        predicted, y = accelerator.gather_for_metrics((predicted, y))\n"
        "        hits += (predicted == y).sum().item()\n"
    ) in output
    assert "gather_for_metrics((loss" not in output and ", loss" not in output
    assert [
        f
        for f in without_padding_note(without_batch_note(findings))
        if f.code != "MIG953" or f.needs_human
    ] == []


def test_python_sets_per_batch_are_counted_by_reducing_their_sizes():
    output, findings = _migrate(
        "        loss, logits = outputs\n"
        "        guessed = set(zip(logits.argmax(dim=1).tolist(), range(len(y))))\n"
        "        truth = set(zip(y.tolist(), range(len(y))))\n"
        "        found += len(guessed)\n"
        "        hits += len(guessed & truth)\n"
        "        losses.append(loss.item())\n"
    )
    reduce = 'accelerator.reduce(torch.tensor({}, device=accelerator.device), "sum").item()'
    assert f"        found += {reduce.format('len(guessed)')}\n" in output
    assert f"        hits += {reduce.format('len(guessed & truth)')}\n" in output
    assert '        loss = accelerator.reduce(loss, "mean")\n        losses.append(' in output
    assert "gather_for_metrics" not in output
    assert [
        f
        for f in without_padding_note(without_batch_note(findings))
        if f.code != "MIG953" or f.needs_human
    ] == []


def test_a_batch_read_after_the_metric_keeps_its_shape():
    """Gathering `logits` before the loss would make `logits.view(4, 3)` below fail."""
    output, findings = _migrate(
        "        loss, logits = outputs\n"
        "        total_loss += torch.nn.functional.cross_entropy(logits, y, reduction='sum').item()\n"
        "        if i == 0:\n"
        "            first = logits.view(4, 3)[:2]\n"
        "            print(first)\n"
        "    total_loss /= len(loader.dataset)\n"
    )
    assert (
        "        total_loss += accelerator.reduce(torch.nn.functional.cross_entropy(logits, y, "
        "reduction='sum'), \"sum\").item()\n"
        "        if i == 0:\n"
        "            first = logits.view(4, 3)[:2]\n"
        "            accelerator.print(first)\n"
    ) in output
    assert "gather_for_metrics" not in output
    assert [
        f
        for f in without_padding_note(without_batch_note(findings))
        if f.code != "MIG953" or f.needs_human
    ] == []


def test_a_listed_batch_read_after_the_metric_is_a_finding():
    output, findings = _migrate(
        "        loss, logits = outputs\n"
        "        losses.append(logits.softmax(dim=1))\n"
        "        if i == 0:\n"
        "            print(logits.view(4, 3)[:2])\n"
    )
    findings = without_padding_note(without_batch_note(findings))
    assert [f.code for f in findings if f.code != "MIG953"] == ["MIG031"]
    assert "line 32 still reads `logits`" in findings[0].message
    assert findings[0].line == 30
    assert "gather_for_metrics" not in output


def test_the_throw_away_name_is_never_gathered():
    output, findings = _migrate(
        "        _, logits = outputs\n        losses.append(logits.argmax(dim=1))\n"
    )
    assert "        logits = accelerator.gather_for_metrics(logits)\n" in output
    assert [
        f
        for f in without_padding_note(without_batch_note(findings))
        if f.code != "MIG953" or f.needs_human
    ] == []


def test_a_loss_shown_per_batch_by_the_enumerate_index_is_reduced_with_mean():
    """`total_loss / (i + 1)` averages over batches: the mean over processes keeps it."""
    output, _ = _migrate(
        "        loss, logits = outputs\n"
        "        total_loss += loss.item()\n"
        "        report(i, total_loss / (i + 1))\n"
    )
    assert (
        '        loss = accelerator.reduce(loss, "mean")\n        total_loss += loss.item()\n'
        in (output)
    )
