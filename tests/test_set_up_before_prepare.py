"""Uses before prepare that run no training do not block its placement (issue 27, review of
2026-11-27 rule 1): an object built on the optimizer that only holds it (a schedule of the
script's or a library's own, made before the loaders), and read-only diagnostics of the model
before its optimizer exists (`torchsummary`/`torchinfo` summaries, `thop` FLOP counts), which
keep the model where the original had placed it. The golden fixtures
fixtures/golden/placement_schedule_*.in.py and placement_summary_*.in.py hold the reviewed
outputs; here the other spellings, the shapes that must still refuse, and the fixtures on 2
processes (with small stand-ins for the diagnostic libraries, written here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, ROOT, without_batch_note
from tests.golden_runs import launch_in_turn

HEAD = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
import schedules
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""
TAIL = """\
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _migrate(middle: str, head: str = HEAD, tail: str = TAIL):
    return migrate_text(head + textwrap.dedent(middle) + tail)


def _prepare_after(output: str, text: str) -> bool:
    return output.index(text) < output.index("accelerator.prepare(")


@pytest.mark.parametrize(
    "use",
    [
        "decay = schedules.PolynomialLRDecay(optimizer, max_decay_steps=10)",
        "decay = schedules.CosineAnnealingWarmupRestarts(optimizer, first_cycle_steps=4)",
        "warmup = schedules.Warmup(optimizer=optimizer, period=2)",
        "from schedules import PolyDecay\ndecay = PolyDecay(optimizer, 10, power=0.9)",
        (
            "class Decay:\n    def __init__(self, optimizer):\n        self.optimizer = optimizer\n"
            "\n    def step(self):\n        self.optimizer.param_groups[0]['lr'] *= 0.5\n\n\n"
            "decay = Decay(optimizer)"
        ),
    ],
)
def test_an_object_holding_the_optimizer_before_the_loader_keeps_the_plain_one(use):
    output, findings = _migrate(use + "\n")
    assert [f.code for f in without_batch_note(findings)] == []
    assert _prepare_after(output, "loader = DataLoader(")
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output


@pytest.mark.parametrize(
    "use",
    [
        # a function may do anything with it; this file's own is read instead (it steps)
        "def warm_up(optimizer):\n    optimizer.step()\n\n\nwarm_up(optimizer)",
        "schedules.warm_up(optimizer)",  # a function of another module
        # a class of this file that steps what it holds
        (
            "class Stepper:\n    def __init__(self, optimizer):\n        self.optimizer = optimizer"
            "\n\n    def run(self):\n        self.optimizer.step()\n\n\nstepper = Stepper(optimizer)"
        ),
        "trainer = schedules.Trainer(model, optimizer)",  # the model handed over with it
    ],
)
def test_a_hand_over_that_may_step_or_run_still_refuses(use):
    output, findings = _migrate(use + "\n")
    assert output is None
    assert [f.code for f in findings] == ["MIG900", "MIG950"]  # refused, and says it is left
    assert "which may run it" in findings[0].message


DIAGNOSTIC_HEAD = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(2, 1).to(device)
"""
DIAGNOSTIC_TAIL = """\
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("use", "traces"),
    [
        ("from torchsummary import summary\nsummary(model, (2,))", True),
        ("import torchinfo\nstats = torchinfo.summary(model, input_size=(1, 2), verbose=0)", True),
        (
            "from thop import profile\nmacs, params = profile(model, inputs=(torch.ones(1, 2),))",
            True,
        ),
        (
            "from ptflops import get_model_complexity_info\nget_model_complexity_info(model, (2,))",
            True,
        ),
        ("from fvcore.nn import parameter_count_table\nprint(parameter_count_table(model))", False),
        # a watcher hooks the gradients of the module the DDP wrap holds, and runs nothing
        ('import wandb\nwandb.watch(model, log="all")', False),
        ("import wandb as wb\nwb.watch(model, log_freq=10)", False),
    ],
)
def test_a_diagnostic_before_the_optimizer_keeps_the_model_placed_for_it(use, traces):
    output, findings = _migrate(use + "\n", DIAGNOSTIC_HEAD, DIAGNOSTIC_TAIL)
    assert [f.code for f in without_batch_note(findings)] == []
    last_line = use.splitlines()[-1].split("(")[0]
    assert _prepare_after(output, last_line)
    # a diagnostic that runs the model sees it on the device, as in the original
    placed = "model = torch.nn.Linear(2, 1).to(device)" in output
    assert placed == traces
    assert ("device = accelerator.device" in output) == traces


def test_a_summary_of_a_fresh_model_keeps_its_own_device_text():
    output, findings = _migrate(
        'from torchsummary import summary\nsummary(torch.nn.Linear(2, 1), (2,), device="cpu")\n',
        DIAGNOSTIC_HEAD,
        DIAGNOSTIC_TAIL,
    )
    assert without_batch_note(findings) == []
    assert 'summary(torch.nn.Linear(2, 1), (2,), device="cpu")' in output


def test_a_device_text_handed_to_torchsummary_stays_text():
    head = DIAGNOSTIC_HEAD.replace(
        'torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        '"cuda" if torch.cuda.is_available() else "cpu"',
    )
    output, _ = _migrate(
        "import torchsummary\ntorchsummary.summary(model, (2,), device=device)\n",
        head,
        DIAGNOSTIC_TAIL,
    )
    assert "torchsummary.summary(model, (2,), device=device.type)" in output


def test_a_diagnostic_after_the_optimizer_needs_no_placement_of_its_own():
    output, findings = _migrate(
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "from torchsummary import summary\nsummary(model, (2,))\n",
        DIAGNOSTIC_HEAD,
        DIAGNOSTIC_TAIL.replace("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n", ""),
    )
    # prepare goes before the first use after the last definition: the summary sees the
    # prepared model, which prepare placed
    assert without_batch_note(findings) == [] and "model = torch.nn.Linear(2, 1)\n" in output
    assert output.index("accelerator.prepare(") < output.index("summary(")


# -- the golden fixtures on 2 processes ------------------------------------------------------

STAND_INS = {
    # `schedules.PolyLRDecay`: a schedule of the project's own, holding the optimizer
    "schedules.py": """\
        class PolyLRDecay:
            def __init__(self, optimizer, max_decay_steps, power=1.0):
                self.optimizer = optimizer
                self.max_decay_steps = max_decay_steps
                self.power = power
                self.base = [group["lr"] for group in optimizer.param_groups]
                self.count = 0

            def step(self):
                self.count = min(self.count + 1, self.max_decay_steps)
                factor = (1 - self.count / self.max_decay_steps) ** self.power
                for group, base in zip(self.optimizer.param_groups, self.base):
                    group["lr"] = base * factor
        """,
    # torchsummary, torchinfo, thop as their callers see them: a forward on a made-up input,
    # on the device they are told (torchsummary's is text), with the model's own weights there
    "torchsummary.py": """\
        import os

        import torch

        def summary(model, input_size, batch_size=-1, device="cuda"):
            device = device.lower()
            assert device in ("cuda", "cpu"), device
            out = model(torch.rand(2, *input_size).to(device))
            count = sum(p.numel() for p in model.parameters())
            if os.environ.get("RANK", "0") == "0":  # one pipe: the other's lines would interleave
                print(f"torchsummary: {count} parameters, output {tuple(out.shape)}")
        """,
    "torchinfo.py": """\
        import os

        import torch

        def summary(model, input_size, device=None, verbose=1):
            weights = next(model.parameters()).device
            assert torch.device(device).type == weights.type, (device, weights)
            out = model(torch.rand(*input_size, device=device))
            if os.environ.get("RANK", "0") == "0":
                print(f"torchinfo: output {tuple(out.shape)} on {weights.type}")
        """,
    "thop.py": """\
        def profile(model, inputs):
            model(*inputs)
            params = sum(p.numel() for p in model.parameters())
            return float(2 * params), float(params)
        """,
}
FIXTURES = [
    "placement_schedule_holds_optimizer",
    "placement_schedule_module_global",
    "placement_summary_before_optimizer",
    "placement_summary_module_level",
]


def _stand_ins(folder) -> None:
    for name, text in STAND_INS.items():
        (folder / name).write_text(textwrap.dedent(text))


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("set_up")
    _stand_ins(folder)
    return launch_in_turn(folder, FIXTURES)


@pytest.mark.slow
def test_a_schedule_of_the_script_drives_the_prepared_optimizer(launched):
    out = launched["placement_schedule_holds_optimizer"]
    lines = [line for line in out.splitlines() if line.startswith("epoch ")]
    # 96 samples, batch 12, two processes: 4 batches each; the schedule built on the plain
    # optimizer sets the learning rate the prepared one steps with: 0.1 * (1 - e / 3) ** 0.9
    expected = [0.1 * (1 - k / 3) ** 0.9 for k in (1, 2, 3)]
    assert [float(line.split("lr ")[1].split()[0]) for line in lines] == pytest.approx(
        expected, abs=1e-4
    )
    assert all(line.endswith("batches 4") for line in lines), out


@pytest.mark.slow
def test_a_module_global_optimizer_is_prepared_under_main(launched):
    out = launched["placement_schedule_module_global"]
    lines = [line for line in out.splitlines() if line.startswith("epoch ")]
    assert [float(line.split("lr ")[1]) for line in lines] == pytest.approx([0.0375, 0.025, 0.0125])
    losses = [float(line.split("loss ")[1].split()[0]) for line in lines]
    assert losses[-1] < losses[0], out  # the prepared optimizer trained the model


@pytest.mark.slow
def test_summaries_see_the_placed_model_then_it_trains(launched):
    out = launched["placement_summary_before_optimizer"]
    assert "torchinfo: output (1, 2) on cpu" in out
    assert out.count("epoch ") == 2 and "batches 4" in out  # 64 samples, batch 8, 2 processes
    out = launched["placement_summary_module_level"]
    assert "torchsummary: 475 parameters, output (2, 3)" in out  # the fresh copy and the net
    assert "475 parameters, 950 FLOPs" in out
    assert out.count("epoch ") == 2


@pytest.mark.slow
def test_a_module_global_schedule_prints_the_original_numbers(tmp_path):
    """`migrate verify`: the original on 1 process and the migration on 2 train alike."""
    _stand_ins(tmp_path)
    script = tmp_path / "poly.py"
    script.write_text((GOLDEN / "placement_schedule_module_global.in.py").read_text())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    command = [sys.executable, "-m", "migrator", "verify", str(script), "--format", "json"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    report = json.loads(done.stdout)
    assert report["verdict"] == "EQUIVALENT", done.stdout[-3000:] + done.stderr[-3000:]
    assert len(report["steps"]) == 24  # 64 samples, batch 8, 3 epochs: every step compared


@pytest.mark.slow
def test_phase_loaders_in_a_dict_print_the_original_numbers(tmp_path):
    """An item of a dict of prepared loaders is a prepared loader (the value flow): the sums
    are reduced, so the 2-process run prints the 1-process losses and accuracies."""
    script = tmp_path / "phases.py"
    script.write_text((GOLDEN / "phase_loop_loaders_in_a_dict.in.py").read_text())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    command = [sys.executable, "-m", "migrator", "verify", str(script), "--format", "json"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    report = json.loads(done.stdout)
    assert report["verdict"] == "EQUIVALENT", done.stdout[-3000:] + done.stderr[-3000:]
    assert len(report["steps"]) == 24  # 64 training samples, batch 8, 3 epochs
