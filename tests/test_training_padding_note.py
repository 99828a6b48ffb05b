"""MIG032's note on the running sums it reduces over a training loop (rules/padded_batches.py):
a prepared loader evens out the end of its data by repeating samples from its start on the
processes short of a batch, and the reduced sums count them. The note names the sums and the
loader the loop draws from, through any wrapper; a loop whose sums are not reduced has none."""

from __future__ import annotations

from migrator.engine import migrate_text

HEAD = """\
import torch
from tqdm import tqdm
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(100, 4), torch.randn(100, 1))
train_batches = DataLoader(data, batch_size=8, shuffle=True)
model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters())
"""

LOOPS = {
    "plain loop, sum over the dataset": """
for epoch in range(2):
    running = 0.0
    for x, y in train_batches:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        running += loss.item() * x.size(0)
    print(epoch, running / len(data))
""",
    "enumerate over a progress bar, mean of batches": """
def fit(epochs):
    for epoch in range(epochs):
        running = 0
        for i, (x, y) in enumerate(tqdm(train_batches), 1):
            opt.zero_grad()
            loss = torch.nn.functional.l1_loss(model(x), y)
            loss.backward()
            opt.step()
            running += loss.item()
        print(f"epoch {epoch}: {running / len(train_batches):.3f}")

fit(3)
""",
    "two sums in a while-epoch loop": """
epoch = 0
while epoch < 2:
    running, seen = 0.0, 0
    for batch in train_batches:
        x, y = batch
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        running += loss.item() * len(y)
        seen += len(y)
    print("loss", running / seen)
    epoch += 1
""",
}


def _notes(findings):
    return [f for f in findings if f.code == "MIG032"]


def test_reduced_training_sums_carry_the_padding_note_naming_sums_and_loader():
    expected = {
        "plain loop, sum over the dataset": ["running"],
        "enumerate over a progress bar, mean of batches": ["running"],
        "two sums in a while-epoch loop": ["running", "seen"],
    }
    for case, loop in LOOPS.items():
        output, findings = migrate_text(HEAD + loop)
        assert output is not None, (case, [f.message for f in findings])
        assert "accelerator.reduce(" in output, case
        notes = _notes(findings)
        assert len(notes) == 1, (case, [f.message for f in findings])
        message = notes[0].message
        assert notes[0].level == "note"
        assert "`train_batches`'s data" in message, (case, message)
        assert "even_batches" in message and "drop_last=True" in message
        shown = ", ".join(f"`{name}`" for name in expected[case])
        assert f"({shown})" in message, (case, message)


def test_the_note_sits_on_the_loop_whose_sums_are_reduced():
    source = HEAD + LOOPS["plain loop, sum over the dataset"]
    _output, findings = migrate_text(source)
    (note,) = _notes(findings)
    lines = source.splitlines()
    assert lines[note.line - 1].strip() == "for x, y in train_batches:"


def test_no_note_where_no_sum_is_reduced():
    printed_per_batch = """
for epoch in range(2):
    for x, y in train_batches:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("last loss", loss.item())
"""
    counted_steps = """
steps = 0
for epoch in range(2):
    for x, y in train_batches:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
print("steps", steps)
"""
    for loop in (printed_per_batch, counted_steps):
        output, findings = migrate_text(HEAD + loop)
        assert output is not None, [f.message for f in findings]
        assert not _notes(findings), [f.message for f in findings]


def test_no_note_where_the_loader_drops_its_last_batch():
    """A prepared loader built with `drop_last=True` drops the last round of batches instead of
    evening it out: nothing counts twice, and no note says it does."""
    dropping = HEAD.replace(
        "batch_size=8, shuffle=True)", "batch_size=8, shuffle=True, drop_last=True)"
    )
    for case, loop in LOOPS.items():
        output, findings = migrate_text(dropping + loop)
        assert output is not None, (case, [f.message for f in findings])
        assert "accelerator.reduce(" in output, case
        assert not _notes(findings), (case, [f.message for f in findings])


def test_an_evaluation_over_a_loader_that_drops_its_last_batch_has_no_padding_note():
    source = (
        HEAD
        + """
val_batches = DataLoader(data, batch_size=8, drop_last=True)
for epoch in range(2):
    for x, y in train_batches:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    errors = []
    with torch.no_grad():
        for x, y in val_batches:
            err = torch.nn.functional.l1_loss(model(x), y).item()
            errors.append(err)
    print(sum(errors) / len(errors))
"""
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert "err = accelerator.reduce(" in output, output
    assert not [f for f in findings if "even_batches" in f.message], [f.message for f in findings]
    padded = source.replace("batch_size=8, drop_last=True)", "batch_size=8)")
    _output, findings = migrate_text(padded)
    assert [f.code for f in findings if "even_batches" in f.message] == ["MIG031"]
    dropped = [f for f in migrate_text(source)[1] if "drop_last=True" in f.message]
    assert [f.code for f in dropped] == ["MIG031"]
    assert "drops the last round of batches" in dropped[0].message


EVALUATED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def batches(data, batch_size, train):
    return DataLoader(data, batch_size=batch_size, shuffle=train, drop_last=True)


data = TensorDataset(torch.randn(100, 4), torch.randint(0, 3, (100,)))
train_batches = batches(data, 8, True)
val_batches = batches(data, 8, False)
model = torch.nn.Linear(4, 3)
opt = torch.optim.Adam(model.parameters())
for epoch in range(2):
    for x, y in train_batches:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in val_batches:
            predicted = model(x).argmax(1)
            correct += (predicted == y).sum().item()
            seen += y.size(0)
    print(correct / seen)
"""


def test_a_gathered_evaluation_says_a_dropped_last_round_counts_fewer_samples():
    """`return DataLoader(..., drop_last=True)` from a helper (h8 speech notebook): the gathered
    metrics miss the last round of batches the prepared loader drops, which the original
    evaluated; the note says so (and no padding note says samples repeat)."""
    output, findings = migrate_text(EVALUATED)
    assert output is not None, [f.message for f in findings]
    assert "accelerator.gather_for_metrics((predicted, y))" in output
    messages = [f.message for f in findings if f.code == "MIG031"]
    assert len(messages) == 1 and "`val_batches` drops its last incomplete batch" in messages[0]
    assert not [f for f in findings if "even_batches" in f.message]
