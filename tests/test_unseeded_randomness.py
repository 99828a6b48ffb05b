"""MIG009 where the prepare sees no seed: torch's generators start alike on every process
(CUDA's from one fixed seed, the CPU's in most builds), so a program that trains with torch
randomness (noise drawn in the loop, dropout in its model, torchvision's random transforms)
gets torch seeded again after the prepare from where it started, offset by the process index:
each process draws its own, process 0 keeps the original's stream. A seed set in a caller
counts the same; NumPy's and Python's generators start from entropy and are left; a program
that seeds per process already is left."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

TRAINED = """\
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def train(epochs):
    loader = DataLoader(TensorDataset(torch.arange(32.0).view(8, 4)), batch_size=2)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), {layer}torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    drawn = []
    for epoch in range(epochs):
        for (x,) in loader:
            {draw}
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return drawn


{main}
"""
OFFSET = "torch.manual_seed(torch.initial_seed() + accelerator.process_index)"


def _migrate(layer="", draw="pass", main="train(1)"):
    output, findings = migrate_text(TRAINED.format(layer=layer, draw=draw, main=main))
    assert output is not None, [f.message for f in findings]
    return output, [f for f in findings if f.code == "MIG009"]


def test_torch_randomness_while_training_is_offset_per_process():
    cases = {
        "noise in the loop": {"draw": "drawn.append(torch.randn(1).item())"},
        "dropout in the model": {"layer": "torch.nn.Dropout(0.5), "},
        "a seed in the caller": {
            "layer": "torch.nn.Dropout(0.5), ",
            "main": "def main():\n    torch.manual_seed(7)\n    train(1)\n\n\nmain()",
        },
    }
    for case, parts in cases.items():
        output, notes = _migrate(**parts)
        assert (
            "    if accelerator.process_index:  # each process draws its own randomness" in output
        ), case
        assert f"        {OFFSET}\n" in output, case
        assert len(notes) == 1 and "starting seed + k" in notes[0].message, case


def test_numpy_python_and_per_process_seeds_are_left():
    for parts in (
        {"draw": "drawn.append(np.random.rand())"},
        {"draw": "drawn.append(random.random())"},
        {
            "draw": "drawn.append(torch.randn(1).item())",
            "main": "torch.manual_seed(7 + 0 * 1)\nrank = 0\ntorch.manual_seed(7 + rank)\ntrain(1)",
        },
        {"draw": "pass"},
    ):
        output, _notes = _migrate(**parts)
        assert "initial_seed" not in output, parts


def test_two_processes_draw_their_own_noise_and_process_zero_the_originals(tmp_path):
    main = (
        "def main():\n    torch.manual_seed(7)\n    return train(1)\n\n\n"
        "import os\n\n"
        "drawn = main()\n"
        "import sys\n\n"
        "sys.stderr.write(f\"drawn {os.environ.get('RANK', '0')} {drawn!r}\\n\")\n"
    )
    output, _ = _migrate(draw="drawn.append(round(torch.randn(1).item(), 6))", main=main)
    original = TRAINED.format(
        layer="",
        draw="drawn.append(round(torch.randn(1).item(), 6))",
        main="torch.manual_seed(7)\nprint(repr(train(1)))",
    )
    import subprocess
    import sys

    (tmp_path / "original.py").write_text(original)
    alone = subprocess.run([sys.executable, "original.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, check=True).stdout.strip()  # fmt: skip
    (tmp_path / "migrated.py").write_text(output)
    done = launch(tmp_path / "migrated.py", tmp_path)
    lines = dict(
        line.split(" ", 2)[1:] for line in done.stderr.splitlines() if line.startswith("drawn ")
    )
    first, second = lines["0"], lines["1"]
    assert first != second
    assert eval(first) == eval(alone)[: len(eval(first))]
