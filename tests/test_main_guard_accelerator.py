"""MIG001: an Accelerator every user of which runs from the script's `if __name__ ==
"__main__":` is made as that block's first statement, not at module level. A module-level
Accelerator runs again in every process that imports the script: DataLoader workers started
by spawn or forkserver (Python 3.14's default on Linux) re-import it and would each set up the
process group again (h11 review: two migrations hung with workers started that way)."""

from __future__ import annotations

import textwrap

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

HELPERS = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def fit(model, loader, optimizer):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        noise = torch.zeros(1, device=device)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x) + noise, y)
        loss.backward()
        optimizer.step()
    return loss.item()


def run(workers):
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(data, batch_size=4, num_workers=workers, {context})
    model = nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        last = fit(model, loader, optimizer)
    print("done", last)
{tail}
"""

GUARD = 'if __name__ == "__main__":\n    run(2)\n'


def _migrate(tail: str = GUARD, context: str = "") -> str:
    output, findings = migrate_text(HELPERS.format(tail=tail, context=context))
    assert output is not None, [f.message for f in findings]
    return output


def _guard_opens_with_accelerator(output: str) -> bool:
    return output.rstrip().endswith(
        'if __name__ == "__main__":\n'
        "    accelerator = Accelerator()\n"
        "    device = accelerator.device\n"
        "    run(2)"
    )


def test_functions_run_from_the_guard_get_the_accelerator_made_there():
    output = _migrate()
    assert _guard_opens_with_accelerator(output)
    # the module's device, read by a function run from the guard, moves in after it
    assert "\ndevice = " not in output and "\naccelerator = " not in output


@pytest.mark.parametrize(
    "tail",
    [
        # the guard calls a function that calls the trainer: still only from there
        'def main():\n    run(2)\n\n\nif __name__ == "__main__":\n    main()\n',
        # the guard parses arguments first
        (
            'if __name__ == "__main__":\n    import sys\n    workers = int(sys.argv[1]) '
            "if len(sys.argv) > 1 else 2\n    run(workers)\n"
        ),
        # the spelling with single quotes, a helper run from main() twice
        (
            "def main():\n    for _ in range(1):\n        run(2)\n\n\nif __name__ == '__main__':\n"
            "    main()\n"
        ),
    ],
)
def test_other_spellings_of_a_guarded_entry_open_the_guard(tail):
    output = _migrate(tail)
    guard = output.index("if __name__ ==")
    assert output.index("    accelerator = Accelerator()", guard) > guard
    assert "\naccelerator = Accelerator()" not in output


@pytest.mark.parametrize(
    "tail",
    [
        # the trainer also runs at import
        "run(2)\n" + GUARD,
        # module code after the guard
        GUARD + "print('bye')\nrun(0)\n",
        # handed elsewhere as a value (the callback may run at import)
        "import atexit\natexit.register(run, 0)\n" + GUARD,
        # no guard at all
        "run(2)\n",
    ],
)
def test_code_that_runs_outside_the_guard_keeps_the_module_level_accelerator(tail):
    output = _migrate(tail)
    assert "\naccelerator = Accelerator()\n" in output
    assert "    accelerator = Accelerator()" not in output


def test_a_spawned_worker_function_runs_from_the_guard():
    # mp.spawn(worker, ...) becomes worker(...): worker and its helper run from the guard
    source = textwrap.dedent("""\
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, TensorDataset
        from torch.utils.data.distributed import DistributedSampler


        def train_epoch(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()


        def worker(rank, world_size):
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
            data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
            sampler = DistributedSampler(data, num_replicas=world_size, rank=rank)
            loader = DataLoader(data, batch_size=4, sampler=sampler)
            model = DDP(torch.nn.Linear(4, 1))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(2):
                sampler.set_epoch(epoch)
                train_epoch(model, loader, optimizer)
            if rank == 0:
                print("done")
            dist.destroy_process_group()


        if __name__ == "__main__":
            mp.spawn(worker, args=(2,), nprocs=2)
    """)
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert "\naccelerator = Accelerator()" not in output
    guard = output.index('if __name__ == "__main__":\n')
    assert output[guard:].startswith(
        'if __name__ == "__main__":\n    accelerator = Accelerator()\n'
    )


@pytest.mark.slow
def test_workers_started_by_spawn_do_not_set_up_the_processes_again(tmp_path):
    """Two processes, each with two DataLoader workers that re-import the script: it ends."""
    script = tmp_path / "train.py"
    script.write_text(_migrate(context='multiprocessing_context="spawn"'))
    done = launch(script, tmp_path)
    assert done.stdout.count("done") == 1, done.stdout
