"""MIG004 on programs that compute on the CPU alone. `prepare` puts the model (and a prepared
loader's batches) on `accelerator.device`, a GPU where there is one: the program's own
tensors that meet the model go there where they are made, `.numpy()` and host libraries read
host copies, and where something the model meets cannot be followed the program stays on the
CPU (`Accelerator(cpu=True)`) with a note. Programs that place anything themselves are left to
MIG002 and the rest of MIG004. (No GPU here: the checks read the rewrite, and the 1-process
run shows the rewrite changes nothing on the CPU.)"""

from __future__ import annotations

import subprocess
import sys

from migrator.engine import migrate_text

FULL_BATCH = """\
import numpy as np
import torch
from sklearn.metrics import accuracy_score

torch.manual_seed(0)
rng = np.random.RandomState(0)
X = rng.randn(64, 4).astype("float32")
Y = (X[:, 0] > 0).astype("int64")
{build}
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(30):
    out = model(X_train)
    loss = criterion(out, y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    logits = model(X_test)
    pred = logits.argmax(1)
    acc = (pred == y_test).float().mean().item()
print(f"acc {{acc:.4f}} sk {{accuracy_score(y_test, pred.numpy()):.4f}}")
"""
BUILDS = {
    "tensor": "X_train = torch.tensor(X[:48])\ny_train = torch.tensor(Y[:48])\n"
    "X_test = torch.tensor(X[48:])\ny_test = torch.tensor(Y[48:])",
    "from_numpy": "X_train = torch.from_numpy(X).float()[:48]\ny_train = torch.from_numpy(Y[:48])\n"
    "X_test = torch.from_numpy(X[48:]).float()\ny_test = torch.LongTensor(Y[48:])",
}
DEVICE = ".to(accelerator.device)"


def _migrate(source: str):
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    return output, findings


def test_tensors_built_for_the_model_go_to_its_device_where_they_are_made():
    for spelling, build in BUILDS.items():
        output, findings = _migrate(FULL_BATCH.format(build=build))
        for name in ("X_train", "y_train", "X_test", "y_test"):  # inputs, and what meets outputs
            bound = next(line for line in output.splitlines() if line.startswith(f"{name} = "))
            assert bound.endswith(DEVICE), (spelling, bound)
        assert "accuracy_score(y_test.cpu(), pred.cpu().numpy())" in output, spelling
        assert "cpu=True" not in output
        loop_note = next(f.message for f in findings if f.code == "MIG905")
        assert "now go to `accelerator.device` where they are made" in loop_note
        assert "stay on the CPU" not in loop_note


LOADED = """\
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

X = np.random.RandomState(0).randn(64, 4).astype("float32")
Y = (X[:, 0] > 0).astype("int64")
loader = DataLoader(TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)), batch_size=8)
{model}
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    preds, labels = [], []
    for x, y in loader:
        out = model(x)
        loss = {loss}
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        preds.append(out.argmax(1).numpy())
        labels.append(y.detach().numpy())
    print("acc", (np.concatenate(preds) == np.concatenate(labels)).mean())
probe = torch.tensor(X[:5])
with torch.no_grad():
    print(torch.softmax(model(probe), dim=1).numpy().sum())
"""
LINEAR = "model = torch.nn.Linear(4, 2)"
CROSS_ENTROPY = "torch.nn.functional.cross_entropy(out, y)"


def test_host_reads_of_device_values_take_host_copies():
    output, _ = _migrate(LOADED.format(model=LINEAR, loss=CROSS_ENTROPY))
    assert "preds.append(out.argmax(1).cpu().numpy())" in output
    assert "labels.append(y.detach().cpu().numpy())" in output
    assert f"probe = torch.tensor(X[:5]){DEVICE}\n" in output
    assert "torch.softmax(model(probe), dim=1).cpu().numpy().sum()" in output
    assert "cpu=True" not in output


RECURRENT = """\
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(4, 8, batch_first=True)
        self.out = torch.nn.Linear(8, 2)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), 8)
        seq, _ = self.rnn(x.unsqueeze(1), h0)
        return self.out(seq[:, -1])


model = Net()"""


def test_what_the_model_meets_unfollowed_keeps_the_program_on_the_cpu():
    """A state made inside `forward`, a loss's class weights, a tensor handed in through a
    function's parameter: each would meet the model's device from the CPU, so nothing is
    placed and the Accelerator keeps the program where it ran."""
    weighted = (
        LINEAR + "\nweights = torch.tensor([1.0, 2.0])\ncriterion = torch.nn.CrossEntropyLoss("
        "weight=weights)"
    )
    cases = {
        "state made in forward": LOADED.format(model=RECURRENT, loss=CROSS_ENTROPY),
        "class weights": LOADED.format(model=weighted, loss="criterion(out, y)"),
        "a parameter": LOADED.format(model=LINEAR, loss=CROSS_ENTROPY).replace(
            "probe = torch.tensor(X[:5])\nwith torch.no_grad():\n"
            "    print(torch.softmax(model(probe), dim=1).numpy().sum())\n",
            "\n\ndef predict(inputs):\n    return model(inputs).argmax(1)\n\n\n"
            "print(predict(torch.tensor(X[:5])))\n",
        ),
    }
    for case, source in cases.items():
        output, findings = _migrate(source)
        assert "Accelerator(cpu=True)" in output, case
        assert DEVICE not in output and ".cpu().numpy()" not in output, case
        note = next(f.message for f in findings if f.code == "MIG004" and f.level == "note")
        assert "keeps the program on the CPU, where it ran" in note, case


def test_a_program_that_places_its_tensors_is_left_to_the_other_rules():
    source = LOADED.format(model=LINEAR + ".to('cuda')", loss=CROSS_ENTROPY).replace(
        "        out = model(x)",
        "        x, y = x.to('cuda'), y.to('cuda')\n        out = model(x)",
    )
    output, findings = _migrate(source)
    assert "cpu=True" not in output
    assert "out.argmax(1).numpy()" in output  # the original's own crash on a GPU, not ours
    assert not any(f.code == "MIG004" and "CPU alone" in f.message for f in findings)


def test_the_placed_program_prints_what_the_original_printed_on_one_process(tmp_path):
    source = FULL_BATCH.format(build=BUILDS["from_numpy"])
    (tmp_path / "sklearn").mkdir()  # a stand-in: scikit-learn is no dependency
    (tmp_path / "sklearn" / "__init__.py").write_text("")
    (tmp_path / "sklearn" / "metrics.py").write_text(
        "import numpy as np\n\n\ndef accuracy_score(a, b):\n"
        "    return float((np.asarray(a) == np.asarray(b)).mean())\n"
    )
    (tmp_path / "original.py").write_text(source)
    (tmp_path / "migrated.py").write_text(_migrate(source)[0])
    printed = []
    for script in ("original.py", "migrated.py"):
        done = subprocess.run([sys.executable, script], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, check=True)  # fmt: skip
        printed.append(done.stdout)
    assert printed[0] == printed[1] and printed[0].startswith("acc ")


def test_a_tensor_built_in_place_beside_the_models_output_goes_to_its_device():
    """`criterion(out.squeeze(), torch.tensor(y.values).float())`: the target made in the
    loss call meets the output on the model's device (h11 review: left on the CPU, the loss
    raised on any GPU)."""
    source = FULL_BATCH.format(build=BUILDS["tensor"]).replace(
        "    loss = criterion(out, y_train)",
        "    loss = torch.nn.functional.cross_entropy(out, torch.tensor(Y[:48]).long())\n"
        "    loss = loss + criterion(out, target=torch.from_numpy(Y[:48]))",
    )
    out, findings = _migrate(source)
    assert out is not None, findings
    assert f"cross_entropy(out, torch.tensor(Y[:48]).long(){DEVICE})" in out, out
    assert f"criterion(out, target=torch.from_numpy(Y[:48]){DEVICE})" in out, out
    kept = source.replace(
        "    loss = loss + criterion",
        "    print(np.mean(torch.tensor(Y).numpy()))\n    loss = loss + criterion",
    )
    out, findings = _migrate(kept)
    assert out is not None and "np.mean(torch.tensor(Y)." in out, out
    assert f"torch.tensor(Y){DEVICE}" not in out  # a host library's input, not the model's


def test_a_model_run_through_its_forward_method_is_the_model_run():
    """`model.forward(xb)` hands `xb` to the model as `model(xb)` does (h11 review: a script
    calling `forward` itself got no `cpu=True`, and its host batches met a CUDA model)."""
    source = FULL_BATCH.format(build=BUILDS["tensor"]).replace(
        "    out = model(X_train)", "    out = model.forward(batch_of(X_train))"
    )
    source = source.replace(
        "torch.manual_seed(0)\n", "torch.manual_seed(0)\nbatch_of = lambda t: t\n"
    )
    out, findings = _migrate(source)
    assert "accelerator = Accelerator(cpu=True)" in out, out
    kept = [f for f in findings if f.code == "MIG004"]
    assert kept and "`batch_of(X_train)`" in kept[0].message, findings


COLLECTED = """\
import numpy as np
import matplotlib.pyplot as plt
import torch
from torch.utils.data import DataLoader, TensorDataset

X = np.random.RandomState(0).randn(64, 4).astype("float32")
Y = (X[:, 0] > 0).astype("int64")
train = DataLoader(TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)), batch_size=8)
valid = DataLoader(TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)), batch_size=8)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
valid_losses, margins, counts = [], [], []
for step in range(20):
    x, y = next(iter(train))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        xv, yv = next(iter(valid))
        out = model(xv)
        loss_valid = torch.nn.functional.cross_entropy(out, yv)
    valid_losses.append(loss_valid)
    margins.append(out.max(1).values - out.min(1).values)
    counts.append(loss_valid.item())
    if step % 5 == 0:
        print(step, {read})
plt.plot(margins[-1])
"""


def test_values_of_the_model_collected_for_a_host_library_are_host_copies():
    """`valid_losses.append(loss_valid)` then `np.mean(valid_losses[-100:])`: on a GPU the
    list held device tensors numpy cannot read (h12 review: a tabular notebook crashed at its
    first step, on one process too). The list keeps host copies, as the original's were."""
    for read in ("np.mean(valid_losses[-5:])", "np.std(valid_losses)", "np.mean(counts)"):
        output, _ = _migrate(COLLECTED.format(read=read))
        assert "    margins.append((out.max(1).values - out.min(1).values).cpu())\n" in output
        counts = next(line for line in output.splitlines() if "counts.append(" in line)
        assert ".cpu()" not in counts  # a number already
        copied = "    valid_losses.append(loss_valid.cpu())\n" in output
        assert copied == ("valid_losses" in read), read
