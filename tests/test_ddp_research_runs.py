"""The migrated research-convention fixtures (fixtures/golden/ddp_research_*.out.py and the
ImageNet-style rank arithmetic) run under one `migrate launch --nproc 2`: a driver runs each in
turn in the same two processes (one process-group start for all), and what each prints shows
that the data was split between the processes and that only the main process saved."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, ROOT

pytestmark = pytest.mark.slow

FIXTURES = ["ddp_research_spawn_args", "ddp_rank_computed_by_hand", "ddp_research_batch_sampler"]
DRIVER = textwrap.dedent("""\
    import os, runpy, sys
    for name in sys.argv[1:]:
        os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), name))
        sys.argv = [name + ".py"]
        if os.environ["RANK"] == "0":  # the fixtures print on the main process only
            print(f"=== {name}", flush=True)
        runpy.run_path(name + ".py", run_name="__main__")
    """)


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("research")
    for name in FIXTURES:
        output = (GOLDEN / f"{name}.out.py").read_text()
        assert migrate_text((GOLDEN / f"{name}.in.py").read_text())[0] == output
        (folder / name).mkdir()
        (folder / name / f"{name}.py").write_text(output)
    (folder / "driver.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "driver.py", *FIXTURES]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    parts = done.stdout.split("=== ")
    return folder, {name: next(p for p in parts if p.startswith(name)) for name in FIXTURES}


def test_spawned_worker_with_ranks_on_args_runs_sharded_on_two_processes(launched):
    folder, printed = launched
    text = printed["ddp_research_spawn_args"]
    # 256 samples, batch 16, 2 processes: 8 steps each, printed at steps 0 and 4 by rank 0 only
    assert text.count("(2 processes)") == 4, text
    assert "step 8" not in text and "epoch 1 step 4" in text
    assert text.count("validated 2 batches") == 2  # 64 samples: 2 batches per process, printed once
    assert (folder / "ddp_research_spawn_args" / "checkpoint.pth").exists()


def test_rank_arithmetic_fixture_runs_on_two_processes(launched):
    _, printed = launched
    assert printed["ddp_rank_computed_by_hand"].strip() == "ddp_rank_computed_by_hand"


def test_batch_sampler_fixture_runs_sharded_on_two_processes(launched):
    _, printed = launched
    text = printed["ddp_research_batch_sampler"]
    # 96 samples, batch 8, drop_last, 2 processes: 6 steps each (12 on one process); 40
    # validation samples: 3 batches each (the last one padded, gather_for_metrics trims it)
    assert "epoch 0 steps 6 val batches 3" in text and "epoch 1 steps 6 val batches 3" in text
    assert text.count("epoch") == 2, text  # printed by the main process only
