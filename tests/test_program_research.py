"""Issue 11's acceptance shape on a program of our own (fixtures/programs/research_ddp): the
process group set up by `utils.init_distributed_mode(args)`, DDP and a DistributedSampler under
`if args.distributed:` in main.py, the epoch in engine.py, rank helpers in utils.py. After
`migrate --write` of the folder no native DDP and no plain backward is left, the program has one
Accelerator and its prepare in the entry, trains under `migrate launch --nproc 2`, and `migrate
verify main.py --nproc 2` finds it EQUIVALENT."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from migrator.command import FixRequest, run_fix

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "programs" / "research_ddp"
LEFT_OVER = ("init_process_group", "DistributedDataParallel(", "DistributedSampler(", ".backward()")


def _python_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    return env


def test_the_written_program_keeps_no_native_ddp_and_trains_on_two_processes(
    tmp_path, monkeypatch, capsys
):
    work = tmp_path / "project"
    shutil.copytree(FIXTURE / "in", work)
    monkeypatch.chdir(work)
    assert run_fix(FixRequest(paths=["."], mode="write", no_cache=True)) == 0
    capsys.readouterr()
    sources = {path.name: path.read_text() for path in sorted(work.glob("*.py"))}
    for name, text in sources.items():
        ast.parse(text, name)
        assert not [item for item in LEFT_OVER if item in text], name
    assert sum(text.count("Accelerator(") for text in sources.values()) == 1
    assert "accelerator.prepare(" in sources["main.py"]
    assert "accelerator.backward(loss)" in sources["engine.py"]
    launch = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "main.py"]
    done = subprocess.run(launch, cwd=work, env=_python_env(), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("epoch 1: mean loss") == 1  # the main process only
    assert "on 2 processes" in done.stdout
    assert (work / "checkpoint.pth").exists()


def test_verify_finds_the_research_program_equivalent_on_two_processes(tmp_path):
    work = tmp_path / "project"
    shutil.copytree(FIXTURE / "in", work)
    command = [sys.executable, "-m", "migrator", "verify", "main.py", "--nproc", "2",
               "--format", "json"]  # fmt: skip
    done = subprocess.run(
        command, cwd=work, env={**_python_env(), "TMPDIR": str(tmp_path)}, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["verdict"] == "EQUIVALENT"
