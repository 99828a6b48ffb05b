"""The global batch note (SPEC §3b.8): every migrated program whose training loader is prepared
says once, at that prepare, that each of the N processes now draws its own batches of B (the
global batch N × B, an epoch 1/N of the steps), naming B as the `DataLoader(...)` that makes the
loader writes it, and how to keep the original's batch. Programs already data-parallel with a
DistributedSampler say nothing (their global batch is unchanged); DataParallel's is said as the
per-process batch B against DataParallel's global B."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.fixtures import ROOT
from tests.test_idioms_objects import launch

TRAIN = """\
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    {make}
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        steps = 0
        for x, y in {loop}:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {{epoch}} steps {{steps}}")


if __name__ == "__main__":
    main()
"""


def batch_notes(source: str) -> tuple[str, list]:
    output, findings = migrate_text(textwrap.dedent(source))
    assert output is not None, [f.message for f in findings]
    return output, [f for f in findings if f.code == "MIG006" and "global batch" in f.message]


@pytest.mark.parametrize(
    "make, loop, b",
    [
        ("loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)", "loader",
         "args.batch_size"),
        ("loader = DataLoader(data, 16)", "loader", "16"),
        ("loader = DataLoader(data, shuffle=True)", "loader", "1"),
        ("train_loader = DataLoader(data, batch_size=32)\n    loader = train_loader", "loader",
         "32"),
        ("loaders = {'train': DataLoader(data, batch_size=4)}", "loaders['train']", "4"),
        ("pass", "DataLoader(data, batch_size=args.batch_size)", "args.batch_size"),
    ],
)  # fmt: skip
def test_the_note_names_the_batch_size_as_written(make, loop, b):
    _output, notes = batch_notes(TRAIN.format(make=make, loop=loop))
    assert len(notes) == 1, notes
    message = notes[0].message
    assert f"the global batch is N × `{b}`" in message
    assert "an epoch takes 1/N of the steps" in message
    assert f"learning rates tuned for `{b}` may need scaling" in message
    assert "DataLoaderConfiguration(split_batches=True)" in message
    assert "divide the batch size by N" in message
    assert notes[0].level == "note"


def test_the_note_is_on_the_line_the_training_loader_is_prepared_before():
    source = TRAIN.format(make="loader = DataLoader(data, batch_size=8)", loop="loader")
    output, [note] = batch_notes(source)
    lines = source.splitlines()
    assert lines[note.line - 1].strip().startswith("for epoch in range(2):")
    prepared = output.splitlines().index(
        "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)"
    )
    assert output.splitlines()[prepared + 1].strip() == "for epoch in range(2):"


HELPERS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loaders(cfg):
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    train = DataLoader(data, batch_size=cfg["batch"], shuffle=True)
    return train, DataLoader(data, batch_size=cfg["eval_batch"])


def fit(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    {second}


def main():
    train_loader, eval_loader = make_loaders({{"batch": 16, "eval_batch": 64}})
    fit(torch.nn.Linear(4, 1), train_loader, 2)


main()
"""


def test_the_batch_size_is_read_through_helpers_and_parameters():
    """`fit` receives the loader `main` got from `make_loaders`: B is that DataLoader's."""
    _output, [note] = batch_notes(HELPERS.format(second="pass"))
    assert "N × `cfg['batch']`" in note.message or 'N × `cfg["batch"]`' in note.message


def test_one_note_per_program_however_many_loops_train():
    second = (
        "for x, y in loader:\n"
        "        loss = torch.nn.functional.l1_loss(model(x), y)\n"
        "        optimizer.zero_grad()\n"
        "        loss.backward()\n"
        "        optimizer.step()"
    )
    _output, notes = batch_notes(HELPERS.format(second=second))
    assert len(notes) == 1


DATA_PARALLEL = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=32)
model = torch.nn.Linear(4, 1)
if torch.cuda.device_count() > 1:
    model = torch.nn.DataParallel(model)
model = model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_data_parallel_s_batch_was_split_over_the_gpus():
    _output, [note] = batch_notes(DATA_PARALLEL)
    assert "nn.DataParallel split each batch of `32` over the GPUs" in note.message
    assert "the per-process batch is `32`, the global batch N × `32`" in note.message


DDP_SAMPLER = """\
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["LOCAL_RANK"])
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    dist.destroy_process_group()


main()
"""


def test_a_program_already_sharded_by_its_sampler_keeps_its_global_batch():
    output, findings = migrate_text(DDP_SAMPLER)
    assert output is not None and "accelerator.prepare(" in output, [f.message for f in findings]
    assert not [f for f in findings if "global batch" in f.message]


def test_a_ddp_program_whose_processes_each_read_the_whole_set():
    source = DDP_SAMPLER.replace(", sampler=DistributedSampler(data)", ", shuffle=True")
    source = source.replace("        loader.sampler.set_epoch(epoch)\n", "")
    _output, [note] = batch_notes(source)
    assert "an epoch takes 1/N of the steps" in note.message
    assert "the global batch is N × `8`, as under the original's DDP" in note.message
    assert "split the batches" not in note.message


def test_no_note_where_nothing_is_prepared_or_the_file_is_left():
    loaderless = textwrap.dedent("""\
        import torch

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(10):
            x = torch.randn(8, 4)
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """)
    _output, findings = migrate_text(loaderless)
    assert not [f for f in findings if "global batch" in f.message]
    refused = TRAIN.format(make="loader = DataLoader(data, batch_size=8)", loop="loader").replace(
        "            steps += 1\n",
        "            steps += 1\n            if loss.item() < 0.1:\n                break\n",
    )
    output, findings = migrate_text(refused)
    assert output is None
    assert not [f for f in findings if "global batch" in f.message]


def _steps(text: str) -> list[str]:
    return re.findall(r"^epoch \d steps (\d+)$", text, re.MULTILINE)


@pytest.mark.slow
def test_the_note_says_what_two_processes_do(tmp_path):
    """64 samples in batches of 8: the original takes 8 steps an epoch; on 2 processes each
    takes 4 (1/N of the steps, a global batch of 16), and 8 again with split batches."""
    source = TRAIN.format(make="loader = DataLoader(data, batch_size=args.batch_size)",
                          loop="loader")  # fmt: skip
    (tmp_path / "original.py").write_text(source)
    single = subprocess.run([sys.executable, "original.py"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, check=True)  # fmt: skip
    assert _steps(single.stdout) == ["8", "8"]
    output, [_note] = batch_notes(source)
    (tmp_path / "migrated.py").write_text(output)
    assert _steps(launch(tmp_path / "migrated.py", tmp_path).stdout) == ["4", "4"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), MIGRATE_SPLIT_BATCHES="1")
    env.pop("WORLD_SIZE", None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "migrated.py"]
    split = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=300, check=True)  # fmt: skip
    assert _steps(split.stdout) == ["8", "8"]


CONTRASTIVE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

{size}
loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size={read}, drop_last=True)
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for (x,) in loader:
    z = model(x)
    labels = {labels}
    loss = torch.nn.functional.cross_entropy(z @ z.T, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("size", "read", "labels"),
    [
        ("batch_size = 8", "batch_size", "torch.arange(batch_size)"),
        ("class cfg:\n    bs = 8", "cfg.bs", "torch.arange(cfg.bs, device=z.device)"),
        ("B = 8", "B", "torch.zeros(B, dtype=torch.long)"),
    ],
)
def test_a_tensor_sized_by_the_batch_size_is_named_beside_the_advice(size, read, labels):
    """`labels = torch.arange(batch_size)` (SimCLR, h12 review): with split batches, or a
    batch size divided by N, each process's batch has fewer rows than that tensor - the
    advice would crash the program unless that use changes too; the note says so."""
    output, findings = migrate_text(CONTRASTIVE.format(size=size, read=read, labels=labels))
    assert output is not None, [f.message for f in findings]
    [note] = [f for f in findings if "global batch" in f.message]
    assert f"but `{labels}` at line " in note.message
    assert "read the size from the batch" in note.message


def test_no_such_words_where_nothing_else_reads_the_batch_size():
    source = CONTRASTIVE.format(
        size="batch_size = 8", read="batch_size", labels="torch.arange(x.size(0))"
    )
    output, findings = migrate_text(source)
    assert output is not None
    [note] = [f for f in findings if "global batch" in f.message]
    assert "read the size from the batch" not in note.message
