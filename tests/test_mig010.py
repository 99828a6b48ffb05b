"""MIG010 native DDP: the distributed analysis and the rewrites the golden fixtures do not pin."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest

from migrator.analysis import analyse
from migrator.analysis.distributed.reader import env_kind, read_distributed
from migrator.analysis.syntax.imports import ImportTable
from migrator.analysis.syntax.index import ModuleIndex
from migrator.engine import Options, migrate_text
from migrator.rules.catalogue import RULE_CODES
from migrator.source import Source
from tests.fixtures import ROOT

HEADER = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
"""


def script(body: str, header: str = HEADER) -> str:
    return header + "\n\n" + textwrap.dedent(body)


def migrate(source: str, rules=None):
    options = Options() if rules is None else Options(rules=frozenset(rules))
    output, findings = migrate_text(source, options)
    if output is not None:
        ast.parse(output)
        again, _ = migrate_text(output, options)
        assert again is None, "migrating twice must equal migrating once"
    return output, findings


def codes(findings) -> list[str]:
    return sorted(f.code for f in findings)


TRAIN = """\
def train(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    {model}
    optimizer = torch.optim.SGD({params}.parameters(), lr=0.1)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = ({forward}(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    {tail}
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2)
"""


def train_script(model="model = DDP(torch.nn.Linear(4, 1))", params="model", forward="model",
                 tail="pass") -> str:  # fmt: skip
    return script(TRAIN.format(model=model, params=params, forward=forward, tail=tail))


# -- analysis ----------------------------------------------------------------------------------
def _facts(source: str):
    return read_distributed(ModuleIndex(ast.parse(source), Source(source)))


def test_env_kind_reads_rank_variables_in_every_spelling():
    imports = ImportTable()
    imports.add_import(ast.parse("import os").body[0])
    for code, kind in [
        ('int(os.environ["LOCAL_RANK"])', "local_process_index"),
        ('int(os.environ.get("RANK", 0))', "process_index"),
        ('int(os.getenv("WORLD_SIZE", "1"))', "num_processes"),
        ('os.environ["RANK"]', None),
        ('int(os.environ["OTHER"])', None),
    ]:
        assert env_kind(ast.parse(code, mode="eval").body, imports) == kind, code


def test_spawned_function_rank_and_world_size_params_are_launch_params():
    facts = _facts(train_script())
    spawn = facts.spawns[0]
    assert spawn.removed_params == ["rank", "world_size"]
    assert spawn.arguments == []
    assert {(r.name, r.kind) for r in facts.rank_names} == {
        ("rank", "process_index"),
        ("world_size", "num_processes"),
    }


def test_spawn_argument_not_matching_nprocs_is_kept():
    facts = _facts(
        script("""\
        def worker(local_rank, epochs):
            dist.init_process_group("gloo")

        mp.spawn(worker, args=(3,), nprocs=2)
        """)
    )
    spawn = facts.spawns[0]
    assert spawn.removed_params == ["local_rank"]
    assert [ast.unparse(a) for a in spawn.arguments] == ["3"]
    assert facts.rank_names[0].kind == "local_process_index"


def test_ddp_alias_is_seen_as_the_plain_model():
    source = train_script(model="model = torch.nn.Linear(4, 1)\n    ddp_model = DDP(model)",
                          params="ddp_model", forward="ddp_model")  # fmt: skip
    facts = analyse(ast.parse(source), Source(source))
    assert facts.models == ["model"]
    scope = facts.owner
    assert facts.distributed.unwrapped(scope, "ddp_model") == "model"
    assert facts.role(scope, "ddp_model") == "model"


def test_sampler_shuffle_comes_from_the_sampler():
    facts = _facts(
        script("""\
        data = TensorDataset(torch.randn(8, 2))
        sampler = DistributedSampler(data, shuffle=False)
        loader = DataLoader(data, sampler=sampler, batch_size=2)
        """)
    )
    sampler = facts.samplers[0]
    assert isinstance(sampler.shuffle, ast.Constant) and sampler.shuffle.value is False
    assert len(sampler.loader_args) == 1


def test_nothing_distributed_is_not_present():
    facts = _facts("import torch\nx = torch.zeros(1)\ntorch.cuda.set_device(0)\n")
    assert not facts.present and not facts.findings


# -- rewrites ----------------------------------------------------------------------------------
def test_ddp_alias_uses_become_the_model_and_module_is_unwrapped():
    source = train_script(model="model = torch.nn.Linear(4, 1)\n    ddp_model = DDP(model)",
                          params="ddp_model", forward="ddp_model",
                          tail='torch.save(ddp_model.module.state_dict(), "m.pt")')  # fmt: skip
    output, findings = migrate(source)
    assert "ddp_model" not in output and "DDP" not in output
    # every process wrote the file in the native DDP original; now the main process does
    assert "accelerator.save(accelerator.unwrap_model(model).state_dict()" in output
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output
    assert not findings


def test_wrapped_expression_keeps_the_constructor_without_placement():
    source = train_script(model="model = DDP(torch.nn.Linear(4, 1).to(rank), device_ids=[rank])")
    output, _ = migrate(source)
    assert "    model = torch.nn.Linear(4, 1)\n" in output


def test_module_in_a_helper_handed_the_ddp_model_is_unwrapped():
    source = train_script(tail='save(model, "m.pt")') + textwrap.dedent("""\


        def save(net, path):
            torch.save(net.module.state_dict(), path)
        """)
    output, _ = migrate(source)
    assert "accelerator.save(accelerator.unwrap_model(net).state_dict(), path)" in output


def test_rank_comparisons_become_main_process_checks():
    tail = (
        'if rank != 0:\n        return\n    if 0 == rank:\n        print("main")\n'
        '    if rank > 0:\n        print("worker")\n    if rank == 1:\n        print("one")'
    )
    output, _ = migrate(train_script(tail=tail))
    assert "if not accelerator.is_main_process:\n        return" in output
    assert 'if accelerator.is_main_process:\n        accelerator.print("main")' in output
    assert 'if not accelerator.is_main_process:\n        accelerator.print("worker")' in output
    assert "if accelerator.process_index == 1:" in output


def test_rank_used_as_a_device_becomes_the_accelerator_device():
    tail = ("scale = torch.ones(1).to(rank)\n    other = torch.zeros(1, device=rank)\n"
            '    third = torch.zeros(1).to(f"cuda:{rank}")')  # fmt: skip
    output, _ = migrate(train_script(tail=tail))
    assert "scale = torch.ones(1).to(accelerator.device)" in output
    assert "other = torch.zeros(1, device=accelerator.device)" in output
    assert "third = torch.zeros(1).to(accelerator.device)" in output


def test_dist_rank_calls_and_world_size_become_accelerator_attributes():
    tail = "print(dist.get_rank(), dist.get_world_size(), world_size)\n    dist.barrier()"
    output, _ = migrate(train_script(tail=tail))
    assert ("print(accelerator.process_index, accelerator.num_processes, "
            "accelerator.num_processes)") in output  # fmt: skip
    assert "accelerator.wait_for_everyone()" in output and "dist." not in output


def test_spawn_becomes_a_direct_call_with_a_launch_comment():
    output, _ = migrate(train_script())
    assert "def train():" in output
    assert "    train()  # launch with: migrate launch --nproc 2 <script>\n" in output
    assert "mp." not in output and "import torch.multiprocessing" not in output


def test_direct_calls_of_the_spawned_function_lose_the_rank_arguments():
    source = train_script().replace("    mp.spawn(train, args=(2,), nprocs=2)",
                                    "    if FAST:\n        train(0, 1)\n    else:\n"
                                    "        mp.spawn(train, args=(2,), nprocs=2)")  # fmt: skip
    output, _ = migrate(source)
    assert "        train()\n    else:\n        train()  # launch with" in output


def test_torchrun_ranks_unused_after_the_rewrite_are_removed():
    source = script("""\
        def main():
            local_rank = int(os.environ["LOCAL_RANK"])
            rank = int(os.environ["RANK"])
            dist.init_process_group("gloo")
            torch.cuda.set_device(local_rank)
            data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            loader = DataLoader(data, batch_size=8, shuffle=False,
                                sampler=DistributedSampler(data, shuffle=True))
            model = DDP(torch.nn.Linear(4, 1).cuda(local_rank), device_ids=[local_rank])
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(2):
                loader.sampler.set_epoch(epoch)
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                if rank == 0:
                    print(epoch, loss.item())
        """)
    output, findings = migrate(source)
    for gone in ("LOCAL_RANK", "RANK", "set_device", "init_process_group", "set_epoch",
                 "DistributedSampler", "DDP", "cuda(", "import os"):  # fmt: skip
        assert gone not in output, gone
    assert "loader = DataLoader(data, batch_size=8, shuffle=True)" in output
    assert "if accelerator.is_main_process:" in output
    assert not [f for f in findings if f.code != "MIG953"]  # notes: per-process prints


def test_metric_all_reduce_becomes_accelerator_reduce():
    tail = ("total = loss.detach()\n    dist.all_reduce(total, op=dist.ReduceOp.AVG)\n"
            "    dist.all_reduce(total)")  # fmt: skip
    output, _ = migrate(train_script(tail=tail))
    assert 'total = accelerator.reduce(total, reduction="mean")' in output
    assert 'total = accelerator.reduce(total, reduction="sum")' in output


def test_other_collectives_and_ddp_options_are_left_with_a_finding():
    source = train_script(model="model = DDP(torch.nn.Linear(4, 1), dim=-1, **options)",
                          tail="dist.all_reduce(loss, op=dist.ReduceOp.MAX)")  # fmt: skip
    output, findings = migrate_text(source)
    assert codes(findings) == ["MIG909", "MIG909"]
    assert [f.level for f in findings] == ["warning", "note"]
    # an all-reduce of one process's values leaves them as they are: run with other processes
    assert (
        "if accelerator.num_processes > 1:\n        dist.all_reduce(loss, op=dist.ReduceOp.MAX)"
        in output
    )
    assert "dim=-1" not in output and "kwargs_handlers" not in output
    assert "**options dropped with the wrapper" in findings[0].message


def test_ddp_options_move_to_the_accelerator_as_a_kwargs_handler():
    """`DDP(model, find_unused_parameters=True)` -> `Accelerator(kwargs_handlers=[
    DistributedDataParallelKwargs(find_unused_parameters=True)])`, imported with it; a note.
    An option spelled with DDP's default (`static_graph=False`) asks for nothing."""
    model = (
        "model = DDP(torch.nn.Linear(4, 1), find_unused_parameters=True, static_graph=False, "
        "broadcast_buffers=False)"
    )
    output, findings = migrate(train_script(model=model))
    assert [(f.code, f.level) for f in findings] == [("MIG909", "note")]
    assert "from runtime import Accelerator, DistributedDataParallelKwargs\n" in output
    handler = "DistributedDataParallelKwargs(find_unused_parameters=True, broadcast_buffers=False)"
    assert f"    accelerator = Accelerator(\n        kwargs_handlers=[{handler}],\n    )" in output
    assert "DDP(" not in output


def test_ddp_options_spelled_with_their_defaults_ask_for_nothing():
    model = "model = DDP(torch.nn.Linear(4, 1), find_unused_parameters=False)"
    output, findings = migrate(train_script(model=model))
    assert findings == []
    assert "kwargs_handlers" not in output and "DistributedDataParallelKwargs" not in output


def test_ddp_options_that_differ_between_wrappers_stay_a_finding():
    model = (
        "model = DDP(torch.nn.Linear(4, 1), find_unused_parameters=True)\n"
        "    other = DDP(torch.nn.Linear(4, 1), broadcast_buffers=False)"
    )
    output, findings = migrate_text(train_script(model=model))
    options = [f for f in findings if f.code == "MIG909"]
    assert options and all(f.level == "warning" for f in options)
    assert "kwargs_handlers" not in (output or "")


def test_rank_computed_by_hand_blocks_the_file():
    source = train_script().replace(
        'dist.init_process_group("gloo", rank=rank, world_size=world_size)',
        'dist.init_process_group("gloo", rank=rank * 8 + 1, world_size=world_size)',
    )
    output, findings = migrate_text(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"]


def test_fsdp_and_rpc_block_the_file():
    fsdp = train_script().replace("DDP(torch.nn.Linear(4, 1))", "FSDP(torch.nn.Linear(4, 1))")
    fsdp = fsdp.replace("import os\n", "import os\nfrom torch.distributed.fsdp import "
                        "FullyShardedDataParallel as FSDP\n")  # fmt: skip
    assert migrate_text(fsdp)[0] is None and codes(migrate_text(fsdp)[1]) == ["MIG904", "MIG950"]
    rpc = train_script(tail='rpc.init_rpc("worker", rank=rank, world_size=world_size)')
    rpc = rpc.replace("import os\n", "import os\nimport torch.distributed.rpc as rpc\n")
    assert migrate_text(rpc)[0] is None and codes(migrate_text(rpc)[1]) == ["MIG903", "MIG950"]


def test_sampler_used_elsewhere_blocks_the_file():
    source = train_script().replace(
        "loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))",
        "sampler = DistributedSampler(data)\n    loader = DataLoader(data, sampler=sampler)\n"
        "    print(len(sampler))")  # fmt: skip
    output, findings = migrate_text(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"]


def test_without_prepare_selected_ddp_is_left_with_a_finding():
    rules = [code for code in RULE_CODES if code != "MIG006"]
    output, findings = migrate_text(train_script(), Options(rules=frozenset(rules)))
    assert "MIG907" in codes(findings)
    assert output is None or "DDP(" in output


def test_worker_without_spawn_loses_the_params_that_reach_init_process_group():
    source = script("""\
        def setup(rank, world_size):
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = "12355"
            dist.init_process_group("gloo", rank=rank, world_size=world_size)


        def train_ddp(rank, world_size, epochs):
            setup(rank, world_size)
            data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            loader = DataLoader(data, batch_size=8, shuffle=True)
            model = torch.nn.Linear(4, 1).to(rank)
            ddp_model = DDP(model, device_ids=[rank])
            optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
            for epoch in range(epochs):
                for x, y in loader:
                    loss = (ddp_model(x.to(rank)) - y.to(rank)).pow(2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()


        train_ddp(0, 1, epochs=2)
        """)
    output, findings = migrate(source)
    assert "def train_ddp(epochs):" in output and "train_ddp(epochs=2)" in output
    assert "def setup" not in output and ".to(rank)" not in output
    assert "    model = torch.nn.Linear(4, 1)\n" in output
    # no sampler: each process read the whole set, now its share (the global batch as before)
    [note] = findings
    assert "an epoch takes 1/N of the steps (the original's DDP processes each" in note.message


def test_processes_started_by_hand_with_a_process_group_block_the_file():
    source = train_script().replace(
        "    mp.spawn(train, args=(2,), nprocs=2)",
        "    for r in range(2):\n        mp.Process(target=train, args=(r, 2)).start()",
    )
    output, findings = migrate_text(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"]


def test_module_attribute_before_prepare_is_unwrapped_and_does_not_block_prepare():
    source = train_script(model="model = torch.nn.Linear(4, 1)\n    model = DDP(model)\n"
                                "    model.module.requires_grad_(True)")  # fmt: skip
    output, findings = migrate(source)
    assert "accelerator.unwrap_model(model).requires_grad_(True)" in output
    assert not findings


def test_device_if_else_with_set_device_collapses_once_set_device_is_gone():
    source = script("""\
        def main():
            local_rank = int(os.environ["LOCAL_RANK"])
            dist.init_process_group("gloo")
            if torch.cuda.is_available():
                torch.cuda.set_device(local_rank)
                device = torch.device("cuda", local_rank)
            else:
                device = torch.device("cpu")
            data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
            model = DDP(torch.nn.Linear(4, 1).to(device))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = (model(x) - y).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            print(torch.zeros(1, device=device))
        """)
    output, _ = migrate(source)
    assert "    device = accelerator.device\n" in output
    assert "if torch.cuda.is_available()" not in output and "local_rank" not in output


def test_sampler_only_when_distributed_goes_with_its_guarded_set_epoch():
    source = train_script().replace(
        "loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))",
        "sampler = DistributedSampler(data) if world_size > 1 else None\n"
        "    loader = DataLoader(data, batch_size=8, shuffle=(sampler is None), sampler=sampler)",
    ).replace("    for epoch in range(2):\n",
              "    for epoch in range(2):\n        if sampler is not None:\n"
              "            sampler.set_epoch(epoch)\n")  # fmt: skip
    output, findings = migrate(source)
    assert "loader = DataLoader(data, batch_size=8, shuffle=True)" in output
    assert "sampler" not in output and not findings


def test_cleanup_helper_guarded_by_is_initialized_goes_with_its_imports():
    source = train_script().replace(
        "from torch.utils.data import DataLoader, TensorDataset\n",
        "from torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n",
    ).replace("from torch.utils.data.distributed import DistributedSampler\n", "").replace(
        "    dist.destroy_process_group()\n",
        "    cleanup()\n\n\ndef cleanup():\n    if dist.is_initialized():\n"
        "        dist.destroy_process_group()\n")  # fmt: skip
    output, _ = migrate(source)
    assert "cleanup" not in output and "is_initialized" not in output
    assert "from torch.utils.data import DataLoader, TensorDataset\n" in output


def test_rank_computed_by_hand_for_a_setup_helper_blocks_the_file():
    source = train_script().replace(
        '    dist.init_process_group("gloo", rank=rank, world_size=world_size)\n',
        "    setup(NODE * 8 + rank, world_size)\n",
    ) + textwrap.dedent("""\


        def setup(rank, world_size):
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
        """)
    output, findings = migrate_text(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"]


UNUSED_PARAMETER_MODEL = """\
class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = torch.nn.Linear(4, 1)
            self.spare = torch.nn.Linear(4, 1)  # never in the forward

        def forward(self, x):
            return self.used(x)

    model = DDP(Net(), find_unused_parameters=True)"""


@pytest.mark.slow
def test_a_model_with_unused_parameters_trains_on_two_processes_with_the_handler(tmp_path):
    """Without find_unused_parameters DDP stops at the second step ("Expected to have
    finished reduction in the prior iteration"): the handler carries it to prepare."""
    source = train_script(model=UNUSED_PARAMETER_MODEL, tail='print("trained", flush=True)')
    output, findings = migrate(source)
    assert [f.code for f in findings] == ["MIG909"]
    script = tmp_path / "unused.py"
    script.write_text(output)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", str(script)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("trained") == 1  # accelerator.print: the main process


@pytest.mark.parametrize(
    "model",
    [
        "model = torch.nn.Linear(4, 1)\n    model = DDP(model, device_ids=[rank]).to(rank)",
        "model = DDP(torch.nn.Linear(4, 1)).cuda()",
        "model = DDP(torch.nn.Linear(4, 1).to(rank)).to(rank)",
    ],
)
def test_a_wrap_placed_in_the_same_expression_is_the_model(model):
    """`model = DDP(model, device_ids=[rank]).to(device)` (h9 speech commands): the name holds
    the wrapper, placed; both go, and prepare wraps and places it."""
    output, findings = migrate(train_script(model=model))
    assert output is not None, [f.message for f in findings]
    assert "DDP" not in output and "device_ids" not in output
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output
    assert not [f for f in findings if f.code == "MIG907"]
