"""Properties of MIG010 over native-DDP scripts composed from independent choices (launch style,
DDP import and wrapper form, sampler form, rank guards, barriers, checkpoints): whatever the
combination, the output parses, is stable, keeps none of the hand-written DDP, and prepares the
plain model, optimizer and loader once."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrator.engine import migrate_text

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
DDP_IMPORTS = {
    "alias": ("from torch.nn.parallel import DistributedDataParallel as DDP", "DDP"),
    "plain": ("from torch.nn.parallel import DistributedDataParallel", "DistributedDataParallel"),
    "qualified": ("", "torch.nn.parallel.DistributedDataParallel"),
}
REMOVED = ("init_process_group", "destroy_process_group", "DistributedDataParallel", "DDP(",
           "DistributedSampler", "set_epoch", "spawn", "set_device", ".module", "dist.",
           "LOCAL_RANK", "ddp_model")  # fmt: skip


@dataclass
class Choices:
    launch: str
    ddp_import: str
    wrap: str
    sampler: str
    loader_shuffle: str
    guard: str
    barrier: bool
    checkpoint: bool


def _source(c: Choices) -> str:
    ddp_import, ddp = DDP_IMPORTS[c.ddp_import]
    rank = {"spawn": "rank", "torchrun": "rank", "launch_arg": "args.local_rank"}[c.launch]
    if c.launch == "spawn":
        header = "def train(rank, world_size):\n    dist.init_process_group(\"gloo\", " \
                 "rank=rank, world_size=world_size)"  # fmt: skip
        footer = '\n\nif __name__ == "__main__":\n    mp.spawn(train, args=(2,), nprocs=2)\n'
    elif c.launch == "torchrun":
        header = (
            'def train():\n    rank = int(os.environ["RANK"])\n'
            '    local_rank = int(os.environ["LOCAL_RANK"])\n'
            '    torch.cuda.set_device(local_rank)\n    dist.init_process_group("gloo")'
        )
        footer = '\n\nif __name__ == "__main__":\n    train()\n'
    else:
        header = (
            "def train():\n    parser = argparse.ArgumentParser()\n"
            '    parser.add_argument("--local_rank", type=int, default=0)\n'
            '    args = parser.parse_args()\n    dist.init_process_group("gloo")'
        )
        footer = '\n\nif __name__ == "__main__":\n    train()\n'
    if c.sampler == "named":
        shuffle = {
            "none": "",
            "false": "shuffle=False, ",
            "sampler_is_none": "shuffle=(sampler is None), ",
        }[c.loader_shuffle]
        data = (
            "    sampler = DistributedSampler(data)\n"
            f"    loader = DataLoader(data, batch_size=8, {shuffle}sampler=sampler)"
        )
        set_epoch = "sampler.set_epoch(epoch)"
    else:
        data = "    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))"
        set_epoch = "loader.sampler.set_epoch(epoch)"
    model = {
        "alias": f"    model = Net().to(device)\n    ddp_model = {ddp}(model)",
        "rebind": f"    model = Net().to(device)\n    model = {ddp}(model)",
        "inline": f"    model = {ddp}(Net().to(device))",
    }[c.wrap]
    trained = "ddp_model" if c.wrap == "alias" else "model"
    guard = {"rank": f"if {rank} == 0:", "get_rank": "if dist.get_rank() == 0:",
             "none": "if True:"}[c.guard]  # fmt: skip
    body = f"""\
    device = torch.device("cpu")
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
{data}
{model}
    optimizer = torch.optim.SGD({trained}.parameters(), lr=0.1)
    for epoch in range(2):
        {set_epoch}
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = ({trained}(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        {guard}
            print(epoch, loss.item())
"""
    if c.barrier:
        body += "    dist.barrier()\n"
    if c.checkpoint:
        body += f'    {guard}\n        torch.save({trained}.module.state_dict(), "m.pt")\n'
    body += "    dist.destroy_process_group()\n"
    imports = textwrap.dedent(f"""\
        import argparse
        import os

        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        import torch.nn as nn
        {ddp_import}
        from torch.utils.data import DataLoader, TensorDataset
        from torch.utils.data.distributed import DistributedSampler


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                return self.fc(x)


        """)
    return imports + header + "\n" + body + footer


@st.composite
def ddp_scripts(draw) -> str:
    sampler = draw(st.sampled_from(["named", "inline"]))
    return _source(Choices(
        launch=draw(st.sampled_from(["spawn", "torchrun", "launch_arg"])),
        ddp_import=draw(st.sampled_from(sorted(DDP_IMPORTS))),
        wrap=draw(st.sampled_from(["alias", "rebind", "inline"])),
        sampler=sampler,
        loader_shuffle=draw(st.sampled_from(["none", "false", "sampler_is_none"]))
        if sampler == "named" else "none",
        guard=draw(st.sampled_from(["rank", "get_rank", "none"])),
        barrier=draw(st.booleans()),
        checkpoint=draw(st.booleans()),
    ))  # fmt: skip


@SETTINGS
@given(ddp_scripts())
def test_native_ddp_scripts_lose_every_hand_written_piece(source):
    ast.parse(source)
    output, findings = migrate_text(source)
    assert output is not None
    assert not [f for f in findings if f.level == "warning"], findings
    tree = ast.parse(output)
    assert migrate_text(output)[0] is None, "migrating twice must equal migrating once"
    for construct in REMOVED:
        assert construct not in output, construct
    prepares = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute) and n.func.attr == "prepare"]  # fmt: skip
    assert len(prepares) == 1
    assert [a.id for a in prepares[0].args] == ["model", "optimizer", "loader"]
    assert "accelerator.backward(loss)" in output
    loader = next(n for n in ast.walk(tree) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Name) and n.func.id == "DataLoader")  # fmt: skip
    assert "shuffle" in [k.arg for k in loader.keywords]
    assert "sampler" not in [k.arg for k in loader.keywords]
    assert ".to(device)" not in output
