"""A function some call runs on one process only (`if rank == 0 and step % k == 0:
evaluate(...)` beside an `evaluate(...)` every process runs at the end of the epoch) holds no
collective and forwards the model itself: a gather or reduce inserted there, or DDP's forward,
would wait for processes that never come (h8 ps-slm hung at its first periodic evaluation).
Its loader stays plain (every process evaluates the whole set, as the original's did), with a
note; a guard in any spelling counts (`rank == 0 and ...`, `dist.get_rank() == 0`, a
function called from a guarded one)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

PROGRAM = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def evaluate(model, loader):
    model.eval()
    total_loss, total_batches = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            total_loss += loss.item()
            total_batches += 1
    model.train()
    return total_loss / total_batches


def periodic(model, loader, step):
    print(f"step {{step}} eval {{evaluate(model, loader):.4f}}")


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    val_loader = DataLoader(TensorDataset(torch.randn(24, 4), torch.randn(24, 1)), batch_size=8)
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = 0
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            {guarded}
        print(f"epoch {{epoch}} eval {{evaluate(model, val_loader):.4f}}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""

GUARDS = {
    "rank and a step test": "if rank == 0 and step % 2 == 0:\n"
    '                print(f"step {step} eval {evaluate(model, val_loader):.4f}")',
    "get_rank": "if dist.get_rank() == 0:\n"
    '                print(f"step {step} eval {evaluate(model, val_loader):.4f}")',
    "through a guarded helper": "if rank == 0:\n                periodic(model, val_loader, step)",
}


def _migrated(guard: str) -> str:
    source = PROGRAM.format(guarded=GUARDS[guard])
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    return output


@pytest.mark.parametrize("guard", GUARDS, ids=list(GUARDS))
def test_a_function_some_guarded_call_runs_holds_no_collective(guard):
    output = _migrated(guard)
    evaluate = output[output.index("def evaluate") : output.index("def periodic")]
    assert "accelerator.reduce" not in evaluate and "gather" not in evaluate
    assert "accelerator.unwrap_model(model)(x)" in evaluate  # no DDP forward on one process
    assert "val_loader = accelerator.prepare" not in output
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output


@pytest.mark.slow
def test_the_periodic_evaluation_finishes_on_two_processes(tmp_path):
    script = tmp_path / "periodic.py"
    script.write_text(_migrated("rank and a step test"))
    out = launch(script, tmp_path).stdout
    assert out.count("epoch 1 eval") == 1 and out.count("step 8 eval") == 1, out


def test_the_note_says_the_main_process_alone_evaluates():
    """The loader of a loop run on one process only stays plain; the note says what runs
    (the main process, the whole set), not that every process does."""
    _, findings = migrate_text(PROGRAM.format(guarded=GUARDS["get_rank"]))
    notes = [f.message for f in findings if f.code == "MIG006" and "`val_loader`" in f.message]
    assert notes and all("main process alone evaluates the whole set" in n for n in notes)
    assert not any("; every process runs the whole set" in n for n in notes), notes
