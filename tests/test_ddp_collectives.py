"""Collectives MIG010 leaves as the original wrote them run on the Accelerator's process
group on N processes, but on one process the Accelerator starts none, and a bare collective
raises (h11 re-review: `dist.broadcast_object_list` crashed a 1-process run). One whose
skipping is exact alone (a broadcast, an all-reduce, a barrier), as a statement of its own,
runs under `if accelerator.num_processes > 1:`; others keep their warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrator.engine import migrate_text
from tests.test_mig010 import script

ROOT = Path(__file__).resolve().parents[1]

KEPT = """\
    def train():
        dist.init_process_group("gloo")
        run_id = [f"run-{dist.get_rank()}"]
        @COLLECTIVE@
        data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
        model = DDP(torch.nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(run_id[0])


    if __name__ == "__main__":
        train()
"""


@pytest.mark.parametrize(
    "collective",
    [
        "dist.broadcast_object_list(run_id, src=0)",
        "torch.distributed.broadcast_object_list(run_id)",
    ],
)
def test_a_broadcast_left_as_it_is_runs_where_there_are_other_processes(collective):
    out, findings = migrate_text(script(KEPT.replace("@COLLECTIVE@", collective)))
    assert out is not None, findings
    assert f"    if accelerator.num_processes > 1:\n        {collective}\n" in out, out
    noted = [f for f in findings if f.code == "MIG909"]
    assert noted and noted[0].level == "note", findings


def test_a_gather_left_as_it_is_keeps_its_warning():
    gathered = "names = [None, None]\n        dist.all_gather_object(names, run_id)"
    out, findings = migrate_text(script(KEPT.replace("@COLLECTIVE@", gathered)))
    warned = [f for f in findings if f.code == "MIG909"]
    assert warned and warned[0].level == "warning", findings
    assert "on one process there is no process group" in warned[0].message
    assert out is None or "num_processes > 1" not in out


@pytest.mark.slow
def test_the_guarded_broadcast_runs_on_one_and_two_processes(tmp_path):
    out, findings = migrate_text(
        script(KEPT.replace("@COLLECTIVE@", "dist.broadcast_object_list(run_id, src=0)"))
    )
    assert out is not None, findings
    (tmp_path / "train.py").write_text(out)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    for nproc in ("1", "2"):
        command = [sys.executable, "-m", "migrator", "launch", "--nproc", nproc, "train.py"]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "run-0" in done.stdout and "run-1" not in done.stdout
