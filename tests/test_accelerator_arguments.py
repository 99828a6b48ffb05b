"""Arguments of the Accelerator read from the function that owns training: a `train(args)`
whose accumulation steps or precision switch are its own parameter's fields gets the
Accelerator made there (not refused because some caller passes `args`), and an Accelerator
that must be made there while another function of the file uses it before the owner runs is a
MIG900 naming both, not a NameError at run time."""

from __future__ import annotations

import textwrap

from migrator.engine import migrate_text
from tests.fixtures import without_batch_note

TRAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def train(args):
    loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for i, (x, y) in enumerate(loader):
{step}


def main(args):
    train(args)
"""
ACCUMULATION = """\
        loss = torch.nn.functional.mse_loss(model(x), y) / args.accumulation
        loss.backward()
        if (i + 1) % args.accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()"""
PRECISION = """\
        with torch.autocast("cuda", dtype=torch.float16, enabled=args.amp):
            loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()"""


def test_accumulation_steps_of_the_owners_parameter_are_read_where_it_is_made():
    output, findings = migrate_text(TRAIN.format(step=ACCUMULATION))
    assert without_batch_note(findings) == []
    assert (
        "def train(args):\n"
        "    accelerator = Accelerator(gradient_accumulation_steps=args.accumulation)\n"
    ) in output
    assert "        with accelerator.accumulate(model):\n" in output
    assert "/ args.accumulation" not in output


def test_a_precision_switch_of_the_owners_parameter_is_read_where_it_is_made():
    scaled = TRAIN.replace(
        "    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)\n",
        "    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)\n"
        "    scaler = torch.cuda.amp.GradScaler(enabled=args.amp)\n",
    )
    output, findings = migrate_text(scaled.format(step=PRECISION))
    assert without_batch_note(findings) == []
    assert (
        "    accelerator = Accelerator(\n"
        '        mixed_precision="fp16" if args.amp and torch.cuda.is_available() else "no",\n'
        "    )\n"
    ) in output
    assert "with accelerator.autocast():" in output


def test_a_function_using_the_accelerator_before_the_owner_runs_is_named():
    """`setup(args)` (init_process_group, world size) runs from `main()` before `train(args)`,
    which must make the Accelerator (its accumulation steps are `args`'s)."""
    source = textwrap.dedent("""\
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, TensorDataset
        from torch.utils.data.distributed import DistributedSampler


        def setup(args):
            dist.init_process_group("gloo")
            args.world = dist.get_world_size()


        def train(args):
            data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
            model = DDP(torch.nn.Linear(4, 1))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step, (x, y) in enumerate(loader):
                loss = (model(x) - y).pow(2).mean() / args.accumulation
                loss.backward()
                if (step + 1) % args.accumulation == 0:
                    optimizer.step()
                    optimizer.zero_grad()


        def main(args):
            setup(args)
            train(args)
    """)
    output, findings = migrate_text(source)
    assert output is None
    message = next(f.message for f in findings if f.code == "MIG900")
    assert message == (
        "the Accelerator must be made in `train()`, whose values its arguments read, but "
        "`setup()` uses it and runs from `main()` (line 27), outside `train()`; migrate by hand"
    )
    called_after = source.replace(
        "    setup(args)\n    train(args)\n", "    train(args)\n    setup(args)\n"
    )
    output, findings = migrate_text(called_after)
    assert [f.code for f in findings if f.needs_human] == []
    assert "    global accelerator\n" in output


MODULE_CONFIG = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class CFG:
    accumulation = 2
    train = True


def run({param}, model, optimizer, data):
    loader = DataLoader(data, batch_size=2, shuffle=True)
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y) / {param}.accumulation
        loss.backward()
        if (i + 1) % {param}.accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()


config = CFG()
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
if config.train:
    run(config, model, optimizer, data)
"""


def test_a_parameter_named_as_the_module_value_its_caller_passes_is_read_at_module_level():
    """`run(config, ...)` called with the module's own `config` (h12: an NMT DDP script): the
    Accelerator made at module level reads `config` after it is made, whichever name the
    parameter has - not a refusal saying `config` is made in `run()`."""
    for param in ("config", "cfg"):
        output, findings = migrate_text(MODULE_CONFIG.format(param=param))
        assert output is not None, [f.message for f in findings]
        made = output.index(
            "accelerator = Accelerator(gradient_accumulation_steps=config.accumulation)"
        )
        assert (
            output.index("config = CFG()")
            < made
            < output.index("model, optimizer = accelerator.prepare")
        )
