"""The small2 wrong rewrites, run: one script with an eval loss unpacked from the model's
outputs and read with `.item()`, Python sets of (label, position) pairs counted per batch, a
loss summed while the batch is still viewed with its per-process shape, a helper calling the
model's own method, a save that moves the model to the CPU and back, and a proximal term
matching `named_parameters()` with state-dict keys, a final save loaded back, and an eval loader re-bound to a wrapper of the script's. On 2 processes (lr=0, so both runs
evaluate the same model) the migrated script prints what the original prints on one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from migrator.engine import migrate_text
from tests.fixtures import ROOT, without_batch_note, without_padding_note

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        logits = self.linear(x)
        return torch.nn.functional.cross_entropy(logits, y), logits

    def decode(self, logits):
        return logits.argmax(dim=1)


def validate(model, x, y):
    loss, logits = model(x, y)
    return loss, model.decode(logits)


class Batches:
    def __init__(self, loader, device):
        self.loader, self.device = loader, device

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for x, y in self.loader:
            yield x.to(self.device), y.to(self.device)


def save_on_cpu(model, path):
    original_device = next(model.parameters()).device
    model.cpu()
    try:
        torch.save(model.state_dict(), path)
    finally:
        model.to(original_device)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
model = Tagger().to(device)
anchors = {name: t.clone() for name, t in model.state_dict().items()}
optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
data = TensorDataset(torch.randn(32, 4), torch.randint(0, 3, (32,)))
loader = DataLoader(data, batch_size=4)
val_loader = DataLoader(data, batch_size=4)
val_loader = Batches(val_loader, device)
for epoch in range(2):
    model.train()
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss, _ = model(x, y)
        proximal = 0.0
        for name, p in model.named_parameters():
            if name in anchors:
                proximal += torch.sum((p - anchors[name]) ** 2)
        loss = loss + 0.5 * proximal
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    save_on_cpu(model, "tagger.pt")
    model.eval()
    total_loss = sum_loss = hits = found = 0
    with torch.no_grad():
        for i, (x, y) in enumerate(val_loader):
            x, y = x.to(device), y.to(device)
            outputs = model(x, y)
            loss, logits = outputs[:2]
            total_loss += loss.item()
            guessed = set(zip(logits.argmax(dim=1).tolist(), range(len(y))))
            truth = set(zip(y.tolist(), range(len(y))))
            found += len(guessed)
            hits += len(guessed & truth)
            sum_loss += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            if i == 0:
                first = logits.view(4, 3)[:2]
                print("first rows", first.shape[0])
    total_loss /= len(val_loader)
    sum_loss /= len(data)
    print(f"epoch {epoch} loss {total_loss:.5f} sum {sum_loss:.5f} hits {hits} found {found}")
    vloss, guess = validate(model, x, y)
    print("on", "gpu" if device == "cuda" else "cpu", guess.shape[0])
torch.save(model.state_dict(), "final.pt")


def reload_saved():
    fresh = Tagger()
    fresh.load_state_dict(torch.load("final.pt"))
    return sum(p.numel() for p in fresh.parameters())


print("reloaded", reload_saved())
"""

EPOCH = re.compile(r"epoch \d loss [0-9.]+ sum [0-9.]+ hits \d+ found \d+")


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_eval_counts_and_hand_offs_on_two_processes_equal_one_process(tmp_path):
    migrated, findings = migrate_text(SCRIPT)
    assert migrated is not None and without_padding_note(without_batch_note(findings)) == []
    assert "gather_for_metrics" not in migrated
    assert (
        "val_loader = accelerator.prepare(val_loader)\nval_loader = Batches(val_loader, device)\n"
    ) in migrated
    assert "    finally:\n        model.to(original_device)\n" in migrated
    assert '.state_dict(), "final.pt")\naccelerator.wait_for_everyone()\n' in migrated
    printed = {}
    for name, text, launcher in (
        ("original", SCRIPT, [sys.executable]),
        ("migrated", migrated, [sys.executable, "-m", "migrator", "launch", "--nproc", "2"]),
    ):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "tagger.py").write_text(text)
        done = _run([*launcher, "tagger.py"], folder)
        assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
        assert (folder / "tagger.pt").exists()
        printed[name] = EPOCH.findall(done.stdout)
        assert done.stdout.count("on cpu 4") == 2  # the helper ran, printed once per epoch
        assert "reloaded 15\n" in done.stdout
    assert len(printed["original"]) == 2
    assert printed["migrated"] == printed["original"]
