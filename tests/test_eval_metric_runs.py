"""Issue 14, item 1: a per-batch Python number averaged over the eval batches (the PSNR of a
super-resolution example) is all-reduced, never gathered; on 2 processes the printed average
equals the 1-process one, and the history file and the checkpoints of a helper the epoch loop
calls are written (by the main process only)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.fixtures import GOLDEN, ROOT

PSNR = re.compile(r"Avg\. PSNR: (-?[0-9.]+) dB")


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_per_batch_psnr_on_two_processes_equals_one_process(tmp_path):
    # lr=0: every run evaluates the same (seeded) model, so the metrics must agree exactly;
    # training on 2 processes sees twice the batch and would learn something else.
    scripts = {}
    for kind in ("in", "out"):
        text = (GOLDEN / f"per_batch_float_metric_history.{kind}.py").read_text()
        assert "lr=0.01" in text
        scripts[kind] = tmp_path / kind / "sr.py"
        scripts[kind].parent.mkdir()
        scripts[kind].write_text(text.replace("lr=0.01", "lr=0.0"))
    runs = {
        "original": [sys.executable, str(scripts["in"])],
        "migrated-1": [sys.executable, str(scripts["out"])],
        "migrated-2": [sys.executable, "-m", "migrator", "launch", "--nproc", "2",
                       str(scripts["out"])],
    }  # fmt: skip
    printed, histories = {}, {}
    for name, command in runs.items():
        folder = scripts["in" if name == "original" else "out"].parent
        done = _run(command, folder)
        assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
        printed[name] = PSNR.findall(done.stdout)
        assert done.stdout.count("Checkpoint saved to") == 2  # once per epoch, not per process
        for epoch in (1, 2):
            state = folder / f"model_epoch_{epoch}.pth"
            assert state.exists()
            state.unlink()
        history = folder / "history.json"
        histories[name] = [entry["psnr"] for entry in json.loads(history.read_text())]
        history.unlink()
    assert len(printed["original"]) == 2  # one line per epoch, once (accelerator.print)
    assert printed["migrated-1"] == printed["original"]
    assert printed["migrated-2"] == printed["original"]
    for name in ("migrated-1", "migrated-2"):
        assert len(histories[name]) == 2
        for value, expected in zip(histories[name], histories["original"], strict=True):
            assert abs(value - expected) < 1e-4 * abs(expected)


ACCURACY = re.compile(r"Accuracy of the model on the test images: ([0-9.]+) %")


def test_one_gather_accuracy_on_two_processes_equals_one_process(tmp_path):
    """Issue 14, item 3: `predicted, labels` gathered once, before the first metric statement;
    the count and the accuracy on 2 processes are the 1-process ones (lr=0, as above)."""
    printed = {}
    for kind, command in (("in", []), ("out", []), ("out", ["launch", "--nproc", "2"])):
        text = (GOLDEN / f"eval_accuracy_one_gather.{kind}.py").read_text()
        assert "lr=0.01" in text
        script = tmp_path / f"{kind}{len(command)}" / "accuracy.py"
        script.parent.mkdir()
        script.write_text(text.replace("lr=0.01", "lr=0.0"))
        launcher = [sys.executable, "-m", "migrator", *command] if command else [sys.executable]
        done = _run([*launcher, str(script)], script.parent)
        assert done.returncode == 0, f"{kind} {command}: {done.stderr[-3000:]}"
        printed[f"{kind}{len(command)}"] = ACCURACY.findall(done.stdout)
    assert len(printed["in0"]) == 1
    assert printed["out0"] == printed["in0"]
    assert printed["out3"] == printed["in0"]
