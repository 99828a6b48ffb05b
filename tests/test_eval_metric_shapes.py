"""MIG031 on the shapes of issue 14: Python numbers are reduced, never gathered; tensors read
by several metric statements are gathered once; what cannot be understood is a finding."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.fixtures import without_batch_note, without_padding_note

TEMPLATE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,))), batch_size=2)
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
correct = total = 0
scores = []
with torch.no_grad():
    for x, y in loader:
        predicted = model(x).argmax(dim=1)
{body}
print(correct, total)
"""


def _migrate(body: str) -> tuple[str, list]:
    output, findings = migrate_text(TEMPLATE.format(body=body))
    assert output is not None
    return output, findings


def test_a_summed_python_number_is_all_reduced_with_sum():
    output, findings = _migrate(
        "        hits = (predicted == y).sum().item()\n"
        "        correct += hits\n"
        "        total += y.numel()\n"
    )
    assert (
        "        hits = accelerator.reduce(torch.tensor(hits, device=accelerator.device), "
        '"sum").item()\n        correct += hits\n'
    ) in output
    assert "gather_for_metrics(hits" not in output
    assert without_padding_note(without_batch_note(findings)) == []


def test_a_number_averaged_by_a_batch_counter_is_all_reduced_with_mean():
    output, _ = _migrate(
        "        accuracy = (predicted == y).float().mean().item()\n"
        "        correct += accuracy\n"
        "        total += 1\n"
        "    correct /= total\n"
    )
    assert '"mean").item()\n        correct += accuracy\n' in output


def test_names_read_between_metric_statements_are_not_gathered_early():
    output, _ = _migrate(
        "        total += y.numel()\n"
        "        print(predicted.shape)\n"
        "        correct += (predicted == y).sum().item()\n"
    )
    assert output.count("gather_for_metrics") == 2
    assert "        y = accelerator.gather_for_metrics(y)\n        total += y.numel()\n" in output


def test_one_gather_for_several_metric_statements():
    output, _ = _migrate(
        "        total += y.numel()\n        correct += (predicted == y).sum().item()\n"
    )
    assert output.count("gather_for_metrics") == 1
    assert (
        "        predicted, y = accelerator.gather_for_metrics((predicted, y))\n"
        "        total += y.numel()\n"
    ) in output


def test_a_number_mixed_with_batch_tensors_is_reduced_not_gathered():
    """MIG031 cannot gather `batch_loss` (a number) beside `y`; MIG032 sums `total` over the
    processes after the loop, which answers MIG031's warning: it is not shown."""
    output, findings = _migrate(
        "        batch_loss = torch.nn.functional.cross_entropy(model(x), y).item()\n"
        "        total += batch_loss * y.size(0)\n"
    )
    findings = without_padding_note(without_batch_note(findings))
    assert [f.code for f in findings if f.code not in ("MIG953", "MIG032")] == []
    assert "gather_for_metrics" not in output
    # the sum started before the `with` around the loop is summed over the processes after it
    # (MIG032): the samples' losses of every process's batches, as on one process
    assert (
        "        total += batch_loss * y.size(0)\n"
        "total = accelerator.reduce(torch.tensor(total, device=accelerator.device), "
        '"sum").item()\n'
    ) in output


def test_a_per_batch_loss_tensor_is_reduced_as_a_tensor_not_gathered():
    """`gather_for_metrics(loss)` of a 0-d loss has N elements on N processes: `.item()` fails."""
    output, _ = _migrate(
        "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
        "        correct += loss.item()\n"
        "        total += 1\n"
        "    correct /= total\n"
    )
    assert '        loss = accelerator.reduce(loss, "mean")\n        correct += loss.item()\n' in (
        output
    )
    assert "gather_for_metrics" not in output


def test_a_listed_per_batch_number_is_averaged():
    output, _ = _migrate(
        "        accuracy = (predicted == y).float().mean().item()\n"
        "        scores.append(accuracy)\n"
    )
    assert '"mean").item()\n        scores.append(accuracy)\n' in output


def test_a_number_divided_by_a_setting_is_all_reduced_not_gathered():
    """`loss.item() / args.batch_size` is a Python number: gather_for_metrics of it would be
    a list of floats."""
    output, findings = _migrate(
        "        batch_loss = torch.nn.functional.cross_entropy(model(x), y).item() / cfg.batch\n"
        "        scores.append(batch_loss)\n"
    )
    assert (
        "        batch_loss = accelerator.reduce(torch.tensor(batch_loss, "
        'device=accelerator.device), "mean").item()\n        scores.append(batch_loss)\n'
    ) in output
    assert "gather_for_metrics" not in output
    assert without_padding_note(without_batch_note(findings)) == []


def test_a_loop_target_named_underscore_is_not_the_accumulating_method():
    """`for x, y, _ in loader:` binds `_` to batch data; `scores.append(n)` reads only `n`,
    never `_` (nothing to gather beside the number)."""
    source = TEMPLATE.replace(
        "TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,)))",
        "TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,)), torch.zeros(8))",
    ).replace("for x, y in loader:", "for x, y, _ in loader:")
    body = "        hits = (predicted == y).float().mean().item()\n        scores.append(hits)\n"
    output, findings = migrate_text(source.format(body=body))
    assert (
        "        hits = accelerator.reduce(torch.tensor(hits, device=accelerator.device), "
        '"mean").item()\n        scores.append(hits)\n'
    ) in output
    assert "gather_for_metrics" not in output and "_, hits" not in output
    assert without_padding_note(without_batch_note(findings)) == []


def test_tensors_a_mixed_metric_left_per_process_are_not_gathered_half_later():
    """`total += loss.item() * y.size(0)` leaves `y` this process's batch; a later `correct
    += (predicted == y)` must not gather `predicted` alone: the shapes would no longer match
    on two processes. Both sums are reduced after the loop instead (MIG032), which answers
    MIG031's warnings on them."""
    output, findings = _migrate(
        "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
        "        total += loss.item() * y.size(0)\n"
        "        correct += (predicted == y).sum().item()\n"
    )
    findings = without_padding_note(without_batch_note(findings))
    assert [f.code for f in findings if f.code not in ("MIG953", "MIG032")] == [], findings
    assert "gather_for_metrics" not in output
    for name in ("total", "correct"):
        assert f"{name} = accelerator.reduce(torch.tensor({name}, " in output


def test_batch_names_rebound_through_a_helper_are_gathered_with_the_predictions():
    """`images, masks = to_device(images, masks)` keeps them the loop's batch: a metric
    reading the logits and the masks gathers both at once (gathering the logits alone would
    set N batches of predictions against one batch of targets)."""
    source = TEMPLATE.replace(
        "for x, y in loader:\n        predicted",
        "for x, y in loader:\n        x, y = to_device(x, y)\n        predicted",
    ).replace(
        "correct = total = 0\n",
        "correct = total = 0\n\n\ndef to_device(a, b):\n    return a.to('cpu'), b.to('cpu')\n\n\n",
    )
    output, findings = migrate_text(source.format(body="        tracker.update(predicted, y)\n"))
    assert output is not None, [f.message for f in findings]
    assert "predicted, y = accelerator.gather_for_metrics((predicted, y))\n" in output, output


AGGREGATES = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def run(lam):
    train = DataLoader(TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64, 5))), batch_size=8)
    val = DataLoader(TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40, 5))), batch_size=8)
    model = torch.nn.Linear(4, 15)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in train:
        out = model(x).view(-1, 5, 3)
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, 3), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    values = []
    with torch.no_grad():
        for x, y in val:
            out = model(x).view(-1, 5, 3)
            classes = torch.argmax(out, dim=2)
            {metric}
            values.append(value)
    print(sum(values) / len(values))


run(0.5)
"""


def test_a_value_summed_over_the_batch_is_reduced_not_gathered():
    """A per-batch aggregate is no tensor of samples: `gather_for_metrics` of it stacks one
    per process, and its last-batch cut, by samples, mixed processes up (h9 POS tagger:
    `sum(torch.eq(pred, y)) / len(pred)`, a per-position accuracy, crashed at the sum; h9
    parser: `lam * loss_a + (1 - lam) * loss_b` printed a vector of per-process losses)."""
    metrics = [
        "value = sum(torch.eq(classes, y)) / len(classes)",
        "value = torch.sum(torch.eq(classes, y).float()) / y.numel()",
        (
            "a = torch.nn.functional.cross_entropy(out.reshape(-1, 3), y.reshape(-1))\n"
            "            b = out.abs().mean()\n"
            "            value = (lam * a) + ((1 - lam) * b)"
        ),
    ]
    for metric in metrics:
        output, findings = migrate_text(AGGREGATES.format(metric=metric))
        assert output is not None, (metric, [f.message for f in findings])
        assert "gather_for_metrics" not in output, metric
        assert 'value = accelerator.reduce(value, "mean")' in output, metric


def test_per_sample_values_are_still_gathered():
    output, _ = migrate_text(AGGREGATES.format(metric="value = torch.eq(classes, y).float()"))
    assert "gather_for_metrics" in output
