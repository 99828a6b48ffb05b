"""Single-file research conventions of hand-written DDP (issue 10 item 8, issue 11 item 3 in one
file): `if args.distributed:` choosing the sampler, ranks kept on `args`, spawned workers, and
Hogwild workers left alone. The golden fixture fixtures/golden/ddp_research_*.in.py holds the
reviewed whole-script output; here are the shapes it does not spell out."""

from __future__ import annotations

from tests.test_mig010 import HEADER, codes, migrate, script

SAMPLER_HEADER = HEADER + "from torch.utils.data import RandomSampler\n"

SAMPLERS = """\
def train(rank, world_size, args):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    val = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    if args.distributed:
        sampler = DistributedSampler(data)
        val_sampler = DistributedSampler(val, shuffle=False)
    else:
        sampler = {fallback}
        val_sampler = torch.utils.data.SequentialSampler(val)
    loader = DataLoader(data, batch_size=8, shuffle=(sampler is None), sampler=sampler)
    val_loader = DataLoader(val, batch_size=8, sampler=val_sampler)
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        if args.distributed:
            sampler.set_epoch(epoch)
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(train, args=(2, args), nprocs=2)
"""


def test_sampler_chosen_by_args_distributed_becomes_the_loaders_shuffle():
    for fallback in ("None", "torch.utils.data.RandomSampler(data)"):
        output, findings = migrate(script(SAMPLERS.format(fallback=fallback)))
        assert not findings, findings
        assert "    loader = DataLoader(data, batch_size=8, shuffle=True)\n" in output
        assert "    val_loader = DataLoader(val, batch_size=8, shuffle=False)\n" in output
        assert "sampler" not in output.replace("shuffle", "") and "args.distributed" not in output


def test_sampler_fallback_that_shuffles_differently_is_refused_naming_its_line():
    source = script(SAMPLERS.format(fallback="torch.utils.data.SequentialSampler(data)"))
    output, findings = migrate(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"]
    line = source.splitlines().index("        sampler = torch.utils.data.SequentialSampler(data)")
    assert f"`sampler` is also bound at line(s) {line + 1}" in findings[0].message


def test_sampler_returned_from_a_helper_is_refused_naming_the_use():
    source = script(SAMPLERS.format(fallback="None")).replace(
        "    model = DDP(", "    keep(sampler)\n    model = DDP("
    )
    output, findings = migrate(source)
    line = source.splitlines().index("    keep(sampler)") + 1
    assert output is None and codes(findings) == ["MIG907", "MIG950"]
    assert f"`sampler` is used at line {line}" in findings[0].message


HOGWILD = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader


def train(rank, args, model, dataset):
    torch.manual_seed(args.seed + rank)
    loader = DataLoader(dataset, batch_size=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
"""


def test_hogwild_worker_handed_a_shared_model_is_left_with_a_note():
    output, findings = migrate(HOGWILD)
    assert output is None and codes(findings) == ["MIG908"]
    assert findings[0].level == "note" and "`train(rank, ...)`" in findings[0].message
    assert "shared `model`" in findings[0].message and findings[0].line == 6


def test_worker_called_in_its_own_file_or_building_its_model_is_migrated():
    called = HOGWILD + "\n\ntrain(0, ARGS, torch.nn.Linear(4, 1), DATA)\n"
    builds = HOGWILD.replace("args, model, dataset", "args, dataset").replace(
        "    loader =", "    model = torch.nn.Linear(4, 1)\n    loader ="
    )
    for source in (called, builds):
        output, findings = migrate(source)
        assert "MIG908" not in codes(findings) and "accelerator.backward(loss)" in output


BRANCHES = """\
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.features(x))


def main(args):
    model = Net()
    if args.arch == "vgg":
        model.features = torch.nn.DataParallel(model.features)
        model.cuda()
    else:
        model = torch.nn.DataParallel(model).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = StepLR(optimizer, step_size=30)
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    for epoch in range(2):
        for x, y in loader:
            loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
"""


def test_data_parallel_branches_collapse_and_a_per_epoch_scheduler_may_come_first():
    output, findings = migrate(BRANCHES)
    assert "DataParallel" not in output and ".cuda()" not in output
    assert "args.arch" not in output  # both branches emptied: the `if` went with them
    # StepLR holds the plain optimizer (the prepared one shares its param_groups): prepare
    # goes after the loader, the scheduler stays where it was
    assert output.index("scheduler = StepLR(optimizer") < output.index("loader = DataLoader(")
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output
    notes = [f.message for f in findings if f.code == "MIG901"]
    assert len(notes) == 2 and "around `model.features` removed: accelerator.prepare" in notes[0]


def test_optimizer_over_a_filtered_parameter_list_trains_the_model_it_came_from():
    source = BRANCHES.replace(
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "    parameters = list(filter(lambda p: p.requires_grad, model.parameters()))\n"
        "    optimizer = torch.optim.SGD(parameters, lr=0.1)\n",
    )
    output, findings = migrate(source)
    assert "MIG900" not in codes(findings)
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output


ONE_STEP = """\
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def demo(rank):
    model = torch.nn.Linear(10, 5).to(rank)
    ddp_model = DDP(model, device_ids=[rank])
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.001)
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(ddp_model(torch.randn(20, 10)), torch.randn(20, 5)).backward()
    optimizer.step()


def main():
    env = {key: os.environ[key] for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    rank = int(env["RANK"])
    dist.init_process_group(backend="gloo", rank=int(env["RANK"]), world_size=int(env["WORLD_SIZE"]))
    demo(rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def test_one_step_outside_any_loop_says_so_and_the_environment_copy_is_the_launchers():
    output, findings = migrate(ONE_STEP)
    assert output is None and codes(findings) == ["MIG905"]  # not silent, not MIG907
    assert findings[0].line == 13 and "outside a loop" in findings[0].message
    looped = ONE_STEP.replace("    demo(rank)\n", "    for _ in range(3):\n        demo(rank)\n")
    assert "MIG905" in codes(migrate(looped)[1])  # a loop without a DataLoader: still a note


def test_evaluation_on_the_main_process_only_keeps_its_loader_whole():
    source = script(SAMPLERS.format(fallback="None")).replace(
        "    dist.destroy_process_group()\n",
        "    if rank == 0:\n"
        "        correct = 0\n"
        "        with torch.no_grad():\n"
        "            for x, y in val_loader:\n"
        "                correct += (model(x).argmax(1) == y).sum().item()\n"
        "        print(correct / len(val))\n"
        "    dist.destroy_process_group()\n",
    )
    output, _ = migrate(source)
    assert "accelerator.prepare(model, optimizer, loader)\n" in output  # not val_loader
    assert "gather" not in output and "    if accelerator.is_main_process:\n" in output


BARLOW = """\
import argparse

import torch


def main():
    args = argparse.Namespace(epochs=1, batch_size=16)
    args.ngpus_per_node = torch.cuda.device_count()
    args.rank = 0
    args.dist_url = "tcp://localhost:58472"
    args.world_size = args.ngpus_per_node
    torch.multiprocessing.spawn(main_worker, (args,), args.ngpus_per_node)


def main_worker(gpu, args):
    args.rank += gpu
    torch.distributed.init_process_group(
        backend="nccl", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
    torch.cuda.set_device(gpu)
    model = torch.nn.Linear(4, 1).cuda(gpu)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    sampler = torch.utils.data.distributed.DistributedSampler(data)
    loader = torch.utils.data.DataLoader(
        data, batch_size=args.batch_size // args.world_size, sampler=sampler)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = (model(x.cuda(gpu, non_blocking=True)) - y.cuda(gpu)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if args.rank == 0:
            torch.save(model.module.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
"""


def test_rank_added_to_a_node_rank_on_args_barlow_twins_shape():
    output, findings = migrate(BARLOW)
    assert not [f for f in findings if f.level == "warning"], findings
    for gone in ("args.rank", "args.world_size =", "init_process_group", "set_device", ".cuda("):
        assert gone not in output, gone
    assert "    main_worker(args)  # launch with: migrate launch --nproc N <script>\n" in output
    assert "def main_worker(args):\n" in output
    assert "batch_size=args.batch_size // accelerator.num_processes, shuffle=True)" in output
    assert "        if accelerator.is_main_process:\n" in output
    assert "args.ngpus_per_node = torch.cuda.device_count()" in output  # a plain count: kept


def test_an_unrelated_rank_attribute_in_a_script_without_ddp_is_left_alone():
    source = BARLOW.replace("    torch.multiprocessing.spawn(main_worker, (args,), args.ngpus_per_node)\n",
                            "    main_worker(0, args)\n").replace(
        "    torch.distributed.init_process_group(\n        backend=\"nccl\", init_method=args.dist_url,"
        " world_size=args.world_size, rank=args.rank)\n", "").replace(
        "    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])\n", "").replace(
        "    sampler = torch.utils.data.distributed.DistributedSampler(data)\n", "").replace(
        ", sampler=sampler)", ")").replace("        sampler.set_epoch(epoch)\n", "").replace(
        "model.module.state_dict()", "model.state_dict()")  # fmt: skip
    assert "distributed" not in source and "spawn" not in source
    output, _ = migrate(source)
    assert "    args.rank += gpu\n" in output and "    args.rank = 0\n" in output
    assert "if args.rank == 0:" in output


ALIAS_OPTIMIZER = """\
def main(args):
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    if args.distributed:
        sampler = DistributedSampler(data)
    else:
        sampler = RandomSampler(data)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = torch.nn.Linear(4, 1)
    model_without_ddp = model
    if args.distributed:
        model = DDP(model)
        model_without_ddp = model.module
    optimizer = torch.optim.SGD(model_without_ddp.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model_without_ddp.state_dict(), "model.pt")
"""


def test_an_optimizer_on_the_unwrapped_alias_prepares_the_model_the_loop_runs():
    # DETR, MAE, DeiT and ConvNeXt build the optimizer on `model_without_ddp.parameters()`:
    # preparing the alias would leave the loop running the plain `model`, no gradient synced
    output, findings = migrate(script(ALIAS_OPTIMIZER, header=SAMPLER_HEADER))
    assert output is not None, codes(findings)
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output
    assert "model_without_ddp = model\n" in output  # the plain module, saved as before
    assert "model.module" not in output
    # the sampler branch's other sampler goes with it, and so does its import
    assert "RandomSampler" not in output


def test_a_sampler_import_used_elsewhere_stays():
    body = ALIAS_OPTIMIZER + "\n\ndef evaluate(data):\n    return RandomSampler(data)\n"
    output, _ = migrate(script(body, header=SAMPLER_HEADER))
    assert output is not None and "from torch.utils.data import RandomSampler" in output
    assert "shuffle=True" in output
