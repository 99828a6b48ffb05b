"""Prepare placed around set-up uses (issue 10 item 7, issue 16): uses of the training objects
before their last definition that may see the plain objects (a scheduler built on the
optimizer, a checkpoint loaded, a parameter count, a logger, a plain alias, a helper of this
file that only reads) keep them, and prepare goes after a DataParallel/DDP wrap or a
`torch.compile` re-binding. The golden fixtures fixtures/golden/placement_*.in.py hold the
reviewed outputs; here each runs on 2 processes, and the shapes that must still refuse do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, ROOT, without_batch_note

HEAD = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
import utils
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
model = torch.nn.Linear(2, 1)
"""
TAIL = """\
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _migrate(middle: str, tail: str = TAIL):
    output, findings = migrate_text(HEAD + textwrap.dedent(middle) + tail)
    return output, findings


def _prepare_after(output: str, text: str) -> bool:
    return output.index(text) < output.index("accelerator.prepare(")


@pytest.mark.parametrize(
    "use",
    [
        "print(utils.count_parameters(model))",
        "n_params = utils.num_params(model) / 1e6",
        "logger.info(model)",
        "utils.load_checkpoint(model, 'last.pt')",
        "plain_model = model",
        "utils.weights_init(model)",  # DCGAN-style weights set in place, from another module
        "utils.initialize_weights(model)",
        "metric = utils.is_metric_model(model)",  # a predicate reads it
    ],
)
def test_a_set_up_use_before_the_optimizer_keeps_the_plain_model(use):
    output, findings = _migrate(use + "\n")
    assert [f.code for f in without_batch_note(findings)] == []
    assert _prepare_after(output, use)


@pytest.mark.parametrize(
    "use",
    [
        "utils.warm_up(model)",  # code this file cannot read
        "writer.add_graph(model, torch.zeros(1, 2))",  # traces a forward
        "probe = model\nprint(probe(torch.zeros(1, 2)))",  # an alias that runs the model
    ],
)
def test_a_use_that_may_need_the_prepared_model_still_refuses_with_both_lines(use):
    output, findings = _migrate(use + "\n")
    assert output is None
    message = " ".join(f.message for f in findings if f.code == "MIG900")
    assert "`model` used at line 6" in message and "`optimizer` defined at line" in message


def test_an_alias_the_loop_trains_is_not_a_set_up_use():
    output, findings = _migrate(
        "m = model\n",
        TAIL.replace("model(x)", "m(x)"),
    )
    assert output is None and [f.code for f in findings] == ["MIG900", "MIG950"]


HELPERS = """\
def count(module):
    return sum(p.numel() for p in module.parameters())


def freeze(module, depth=0):
    for name, child in module.named_children():
        freeze(child, depth + 1)
    for p in module.parameters():
        p.requires_grad_(True)
    print(count(module))


def probe(module):
    return module(torch.zeros(1, 2))


"""


def test_a_helper_of_this_file_that_only_reads_keeps_the_plain_model():
    output, findings = _migrate(HELPERS + "freeze(model)\n")
    assert [f.code for f in without_batch_note(findings)] == []
    assert _prepare_after(output, "\nfreeze(model)")


def test_a_helper_of_this_file_that_runs_the_model_still_refuses():
    output, findings = _migrate(HELPERS + "probe(model)\n")
    assert output is None
    assert (
        "`model` used at line 22 (handed to `probe()`, which may run it) before `optimizer` "
        "defined at line 23"
    ) in next(f for f in findings if f.code == "MIG900").message


def test_a_helper_keeping_the_model_in_a_global_still_refuses():
    keep = "SHARED = None\n\n\ndef keep(module):\n    global SHARED\n    SHARED = module\n\n\n"
    output, findings = _migrate(keep + "keep(model)\n", TAIL.replace("model(x)", "SHARED(x)"))
    assert output is None and [f.code for f in findings] == ["MIG900", "MIG950"]


def test_a_scheduler_built_before_a_data_parallel_wrap_is_set_up():
    output, findings = _migrate("""\
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
        model = torch.nn.DataParallel(model)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        decay.step()
        """, "")  # fmt: skip
    # the epoch scheduler, the wrap (and the global batch, no longer split over GPUs)
    assert sorted(f.code for f in without_batch_note(findings)) == ["MIG006", "MIG901"]
    assert "DataParallel" not in output and _prepare_after(output, "decay = ")
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output


def test_state_loaded_before_prepare_goes_into_the_plain_model_once():
    once, _ = _migrate("""\
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.load_state_dict(torch.load("m.pt"))
        model = torch.nn.DataParallel(model)
        """)  # fmt: skip
    assert "\nmodel.load_state_dict(" in once and "unwrap_model" not in once
    # in a loop (folds) a statement before prepare may see last pass's prepared object: the
    # load stays unwrapped, which is right for both
    imports = "".join(HEAD.splitlines(keepends=True)[:2])
    folds, _ = migrate_text(imports + "for fold in range(2):\n" + textwrap.indent("""\
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model.load_state_dict(torch.load("m.pt"))
model = torch.nn.DataParallel(model)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
""", "    "))  # fmt: skip
    assert "accelerator.unwrap_model(model).load_state_dict(" in folds


def test_a_step_count_read_before_the_optimizer_sizes_a_prepared_scheduler():
    # `steps = len(loader)` holds no loader: the loader is prepared with the rest, after the
    # scheduler sized by its full length (which prepare then steps once per process)
    output, findings = _migrate(
        "steps = len(loader)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "decay = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps * 2)\n",
        TAIL.replace("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n", "").replace(
            "    optimizer.step()\n", "    optimizer.step()\n    decay.step()\n"
        ),
    )
    assert without_batch_note(findings) == []
    assert output.count("accelerator.prepare(") == 1
    prepare = "model, optimizer, loader, decay = accelerator.prepare("
    assert prepare in output and output.index("steps = len(loader)") < output.index(prepare)


# -- the golden fixtures on 2 processes ------------------------------------------------------


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    return env


def _migrated(name: str) -> str:
    output = (GOLDEN / f"{name}.out.py").read_text()
    assert migrate_text((GOLDEN / f"{name}.in.py").read_text())[0] == output
    return output


@pytest.mark.slow
def test_wrap_after_set_up_resumes_a_checkpoint_on_two_processes(tmp_path):
    import torch
    from torch import nn

    script = tmp_path / "wrap.py"
    script.write_text(_migrated("placement_wrap_after_setup"))
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
    for p in model.parameters():
        nn.init.zeros_(p)  # a checkpoint far from the fresh start: its loss is ln 2 at first
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
               tmp_path / "ckpt.pt")  # fmt: skip
    runs = {}
    for label, args in (("fresh", []), ("resumed", ["ckpt.pt"])):
        command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", str(script), *args]
        done = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        lines = [line for line in done.stdout.splitlines() if line.startswith("epoch ")]
        assert [line.split(":")[0] for line in lines] == ["epoch 0", "epoch 1"]  # main only
        runs[label] = lines
    assert runs["fresh"] != runs["resumed"]  # the checkpoint reached the trained model


@pytest.mark.slow
def test_compile_after_set_up_is_equivalent_on_two_processes(tmp_path):
    _migrated("placement_compile_after_setup")
    script = tmp_path / "compiled.py"
    script.write_text((GOLDEN / "placement_compile_after_setup.in.py").read_text())
    command = [sys.executable, "-m", "migrator", "verify", str(script), "--format", "json"]
    done = subprocess.run(command, cwd=tmp_path, env={**_env(), "TMPDIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    report = json.loads(done.stdout)
    assert report["verdict"] == "EQUIVALENT", done.stdout[-3000:] + done.stderr[-3000:]
    assert len(report["steps"]) == 24  # 96 samples, batch 12, 3 epochs: every step compared


# -- what a loop over a bound progress bar draws from ------------------------------------------

BARS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm


def train_one_epoch(model, loader, optimizer):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main(epochs=2):
    train_loader = DataLoader(TensorDataset(torch.randn(32, 2), torch.randn(32, 1)), batch_size=4)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    pbar = tqdm(range(epochs), desc="epochs")
    for epoch in pbar:
        pbar.set_postfix(loss=train_one_epoch(model, train_loader, optimizer))
"""


def test_an_epoch_bar_over_a_range_is_not_a_loader():
    output, findings = migrate_text(BARS)
    assert [f for f in without_batch_note(findings) if f.code != "MIG953" or f.needs_human] == []
    assert (
        "model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)"
        in (output)
    )
    assert output.count("accelerator.prepare(") == 1  # `pbar` (a bar over epochs) is not in it


def test_a_bar_name_rebound_to_another_iterable_is_read_where_the_loop_starts():
    output, findings = migrate_text(
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "from tqdm import tqdm\n"
        "train_loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)))\n"
        "model = torch.nn.Linear(2, 1)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for epoch in range(2):\n"
        "    t = tqdm(train_loader)\n"
        "    for x, y in t:\n"
        "        loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "    t = tqdm(range(3))\n"
        "    for i in t:\n"
        "        print(i)\n"
    )
    assert without_batch_note(findings) == []
    assert "model, optimizer, train_loader = accelerator.prepare(" in output
    assert "accelerator.backward(loss)" in output


@pytest.mark.slow
def test_ddp_wrap_after_a_scheduler_resumes_into_the_alias_on_two_processes(tmp_path):
    import torch
    from torch import nn

    script = tmp_path / "wrap_ddp.py"
    script.write_text(_migrated("placement_ddp_wrap_after_scheduler"))
    model = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()  # a momentum buffer in the saved optimizer state
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
               tmp_path / "ckpt.pt")  # fmt: skip
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", str(script),
               "--distributed", "--resume", "ckpt.pt", "--epochs", "3"]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("epoch ")]
    # main process only; the epoch scheduler (unprepared, on the plain optimizer) decays lr
    assert [line.split(" loss")[0] for line in lines] == [
        "epoch 0 lr 0.0700", "epoch 1 lr 0.0490", "epoch 2 lr 0.0343"
    ]  # fmt: skip


def test_a_scheduler_from_a_factory_of_another_module_is_set_up_before_a_wrap():
    output, findings = _migrate(
        """\
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = utils.load_scheduler(optimizer, "step")
        model = torch.nn.DataParallel(model)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        scheduler.step()
        """,
        "",
    )
    assert not [f for f in findings if f.level == "warning"], findings
    assert _prepare_after(output, 'scheduler = utils.load_scheduler(optimizer, "step")')


def test_a_helper_of_this_file_named_like_an_init_is_read_not_trusted_by_name():
    helper = "def init_weights(module):\n    return module(torch.zeros(1, 2))\n\n\n"
    output, findings = _migrate(helper + "init_weights(model)\n")
    assert output is None
    refusal = next(f for f in findings if f.code == "MIG900")
    assert "(handed to `init_weights()`, which may run it)" in refusal.message


def test_an_import_further_down_does_not_push_the_accelerator_past_its_first_use():
    """A module whose `device` is set near the top and which imports again later (a
    SummaryWriter just before the model): the Accelerator comes after the leading imports,
    before `device = accelerator.device`, not after the late import."""
    source = textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        print("training on", device)
        loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
        import math
        model = torch.nn.Linear(2, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(model(x), y) * math.pi
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """)
    output, findings = migrate_text(source)
    assert [f.code for f in findings if f.needs_human] == []
    lines = output.splitlines()
    assert lines[:7] == [
        "import torch",
        "from torch.utils.data import DataLoader, TensorDataset",
        "from runtime import Accelerator",
        "",
        "accelerator = Accelerator()",
        "device = accelerator.device",
        'accelerator.print("training on", device)',
    ]
    assert "import math" in lines
