"""benchmarks/corpus.py on a small corpus made of our own fixtures: every outcome it counts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
SETUP_CELL = """import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randn(8, 1)), batch_size=4)
"""
LOOP_CELL = """%%time
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Train\n"]},
        *(
            {
                "cell_type": "code",
                "metadata": {},
                "source": cell.splitlines(keepends=True),
                "outputs": [],
                "execution_count": None,
            }
            for cell in (SETUP_CELL, LOOP_CELL)
        ),
    ],
    "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def build_corpus(root: Path) -> None:
    famous = root / "famous"
    famous.mkdir(parents=True)
    # rewritten: a plain loop
    shutil.copy(FIXTURES / "golden" / "seed000_minimal_loop.in.py", famous / "plain.py")
    # refused: DataParallel (MIG901/MIG902), no backward in it
    shutil.copy(FIXTURES / "noop" / "data_parallel_snippet.py", famous / "dp.py")
    # noted: an LBFGS closure stepped by the optimizer (MIG905 note), a training script
    shutil.copy(FIXTURES / "noop" / "lbfgs_closure_in_function.py", famous / "closure.py")
    # silent: the runner's textual test says training, migrate finds nothing to say
    (famous / "commented.py").write_text("# loss.backward(); optimizer.step()\nx = 1\n")
    # crashed: a Python 2 training loop (a file without training code is not even parsed)
    (famous / "py2.py").write_text(
        'import torch\nfor x in loader:\n    print "step"\n    loss.backward()\n    optimizer.step()\n'
    )
    # untouched: no training code at all
    shutil.copy(FIXTURES / "noop" / "model_definitions.py", famous / "models.py")
    accelerate = root / "accelerate"
    accelerate.mkdir()
    shutil.copy(FIXTURES / "noop" / "already_migrated_accelerate.py", accelerate / "done.py")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    (notebooks / "train.ipynb").write_text(json.dumps(NOTEBOOK))


def run_runner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "corpus.py"), *args, "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_counts_every_outcome(tmp_path):
    build_corpus(tmp_path)
    done = run_runner(str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    famous = report["sets"]["famous"]["counts"]
    assert famous == {
        "files": 6,
        "training": 4,  # plain.py, closure.py, commented.py, py2.py
        "changed": 1,
        "refused": 1,
        "noted": 1,
        "silent": 1,
        "skipped": 0,
        "crashed": 1,
        "internal": 0,
        "not-idem": 0,
        "no-parse": 0,
        "untouched": 1,
    }
    codes = report["sets"]["famous"]["codes"]
    assert codes["MIG901"] == {"files": 1, "occurrences": 1}
    assert codes["MIG902"] == {"files": 1, "occurrences": 2}
    assert codes["MIG905"]["files"] == 1
    outcomes = {f["name"]: f["outcome"] for f in report["files"]}
    assert outcomes == {
        "commented.py": "silent",
        "dp.py": "refused",
        "closure.py": "noted",
        "models.py": "untouched",
        "plain.py": "changed",
        "py2.py": "crashed",
        "done.py": "untouched",
        "train.ipynb": "changed",
    }
    plain = next(f for f in report["files"] if f["name"] == "plain.py")
    assert plain["idempotent"] is True and plain["parses"] is True
    accelerate = report["sets"]["accelerate"]["counts"]
    assert accelerate["changed"] == 0 and accelerate["files"] == 1
    done_py = next(f for f in report["files"] if f["name"] == "done.py")
    assert {"prepare", "backward", "autocast"} <= set(done_py["accelerator_names"])
    notebook = report["sets"]["notebooks"]["counts"]
    assert notebook["changed"] == 1 and notebook["training"] == 1
    trained = next(f for f in report["files"] if f["name"] == "train.ipynb")
    assert trained["idempotent"] is True and trained["parses"] is True


def test_table_sets_and_verbose_lines(tmp_path):
    build_corpus(tmp_path)
    done = run_runner(str(tmp_path), "--set", "famous", "--set", "nosuchset", "--verbose")
    assert done.returncode == 0  # a measurement: always 0
    assert "no such set" in done.stderr and "nosuchset" in done.stderr
    lines = done.stdout.splitlines()
    header = lines[0].split()
    row = dict(zip(header[1:], lines[1].split()[1:], strict=True))
    assert lines[1].split()[0] == "famous"
    assert (row["files"], row["changed"], row["refused"], row["silent"]) == ("6", "1", "1", "1")
    assert not any(line.startswith("accelerate") for line in lines)  # only the sets asked for
    assert "famous/dp.py: refused" in done.stdout
    assert "famous/commented.py: silent training" in done.stdout
    crashed = lines[lines.index("famous/py2.py: crashed training") + 1]
    assert "cannot parse" in crashed


def test_the_runtime_api_read_from_source_is_what_an_accelerator_has():
    """corpus_api.py reads the runtime's API without importing torch; it must see the methods
    the Accelerator inherits from the runtime's mixins, and nothing it does not have."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import corpus_api
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    from runtime import Accelerator

    names = corpus_api.runtime_api()
    assert {"backward", "save_state", "init_trackers", "wait_for_everyone", "prepare"} <= names
    accelerator = Accelerator(cpu=True)
    assert sorted(name for name in names if not hasattr(accelerator, name)) == []


def test_programs_are_migrated_as_units(tmp_path):
    """An entry whose step is in engine.py (MIG910 alone) is migrated with engine.py; both
    count as changed, idempotent (checked on a copy) and parsing; models.py stays untouched."""
    shutil.copytree(
        FIXTURES / "programs" / "engine_function" / "in", tmp_path / "programs" / "demo"
    )
    done = run_runner(str(tmp_path), "--json", "--set", "programs")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    files = {f["name"]: f for f in report["files"]}
    assert {name: f["outcome"] for name, f in files.items()} == {
        "demo/engine.py": "changed", "demo/main.py": "changed", "demo/models.py": "untouched",
    }  # fmt: skip
    for name in ("demo/engine.py", "demo/main.py"):
        assert files[name]["idempotent"] is True and files[name]["parses"] is True
        assert files[name]["program"] == "demo/main.py"
    text = run_runner(str(tmp_path), "--set", "programs").stdout
    assert "migrated as programs: 1 (2 files)" in text
