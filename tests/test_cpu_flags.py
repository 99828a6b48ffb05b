"""SPEC §3b.5: where the original, on a machine with CUDA, would have trained on the CPU (a
flag, a config, a helper's choice), the Accelerator is made with `cpu=` that condition; a
choice the tool cannot read, or cannot read where the Accelerator must be made, is a note."""

from __future__ import annotations

import textwrap

import pytest

from migrator.engine import migrate_text

SCRIPT = """\
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
{imports}

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-cuda", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--accel", action="store_true")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
{choice}
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def migrated(choice: str, imports: str = "") -> tuple[str, list]:
    source = SCRIPT.format(choice=textwrap.indent(textwrap.dedent(choice), "    "), imports=imports)
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    return output, findings


@pytest.mark.parametrize(
    ("choice", "made"),
    [
        ("""\
         use_cuda = not args.no_cuda and torch.cuda.is_available()
         device = torch.device("cuda" if use_cuda else "cpu")""", "Accelerator(cpu=args.no_cuda)"),
        ('device = torch.device(args.device)', 'Accelerator(cpu=args.device == "cpu")'),
        ('device = "cpu" if args.cpu else "cuda"', "Accelerator(cpu=args.cpu)"),
        ("""\
         if args.cpu or not torch.cuda.is_available():
             device = torch.device("cpu")
         else:
             device = torch.device("cuda")""", "Accelerator(cpu=args.cpu)"),
        ("""\
         use_accel = args.accel and torch.accelerator.is_available()
         device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")""",
         "Accelerator(cpu=not args.accel)"),
        ('device = "cpu"', "Accelerator(cpu=True)"),
        ('device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")', "Accelerator()"),
        ("""\
         if torch.cuda.is_available():
             device = "cuda"
         elif torch.backends.mps.is_available():
             device = "mps"
         else:
             device = "cpu\"""", "Accelerator()"),
        ("""\
         cuda = True if torch.cuda.is_available() else False
         device = torch.device("cuda" if cuda else "cpu")""", "Accelerator()"),
    ],
)  # fmt: skip
def test_the_cpu_the_original_asks_for_reaches_the_accelerator(choice, made):
    output, findings = migrated(choice)
    assert f"    accelerator = {made}\n" in output
    assert "device = accelerator.device" not in output or "device" in choice
    assert not [f for f in findings if f.code == "MIG002"]


def test_a_choice_made_by_an_imported_helper_is_a_note():
    output, findings = migrated(
        "device = pick_device(args.device)", imports="from tools import pick_device\n"
    )
    assert "    accelerator = Accelerator()\n" in output
    assert "pick_device(" not in output.split("import pick_device")[1]  # accelerator.device
    (note,) = [f for f in findings if f.code == "MIG002"]
    assert note.level == "note" and "`device`" in note.message and "cpu=" in note.message


def test_a_flag_read_after_the_accelerator_must_exist_leaves_cpu_out_with_a_note():
    source = """\
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(model, loader, optimizer):
    scale = torch.ones(1, device=DEVICE)
    for x, y in loader:
        x, y = x.to(DEVICE), y.to(DEVICE)
        loss = nn.functional.mse_loss(model(x) * scale, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cpu")
    args = parser.parse_args()
    DEVICE = torch.device("cuda" if args.backend == "gpu" else "cpu")
    model = nn.Linear(3, 1).to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randn(8, 1)), batch_size=2)
    train(model, loader, optimizer)
"""
    output, findings = migrate_text(source)
    assert output is not None
    assert "accelerator = Accelerator()\n" in output
    (note,) = [f for f in findings if f.code == "MIG002"]
    assert '`cpu=args.backend != "gpu"` by hand' in note.message


def test_a_global_accelerator_made_in_main_still_gathers_the_metrics():
    """The Accelerator made in main() after the flags (`global accelerator`) is the one the
    evaluation's gather_for_metrics goes through: the output check sees the gather (no MIG953)."""
    source = SCRIPT.replace(
        "\n\ndef main():",
        textwrap.dedent("""

            def evaluate(model, loader, device):
                correct = 0
                with torch.no_grad():
                    for x, y in loader:
                        x, y = x.to(device), y.to(device)
                        correct += (model(x).argmax(1) == y).sum().item()
                print("accuracy", correct / len(loader.dataset))


            def main():"""),
    ).replace(
        "        optimizer.step()\n",
        "        optimizer.step()\n    evaluate(model, loader, device)\n",
    )
    source = source.format(imports="", choice="    device = torch.device(args.device)")
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert "    global accelerator\n" in output
    assert 'accelerator = Accelerator(cpu=args.device == "cpu")' in output
    assert "accelerator.gather_for_metrics(" in output
    assert not [f for f in findings if f.code == "MIG953"]


def test_fp16_is_off_where_the_cpu_is_asked_for():
    """The original's `torch.autocast("cuda")` did nothing to a model on the CPU, and fp16 has
    no CPU kernels: mixed precision holds only where `cpu=` does not."""
    source = (
        SCRIPT.format(
            imports="",
            choice="    device = torch.device(args.device)",
        )
        .replace(
            "        loss = nn.functional.cross_entropy(model(x), y)\n",
            '        with torch.autocast("cuda", dtype=torch.float16):\n'
            "            loss = nn.functional.cross_entropy(model(x), y)\n",
        )
        .replace(  # fp16 with its GradScaler (without one the autocast is kept as it is)
            "        loss.backward()\n        optimizer.step()\n",
            "        scaler.scale(loss).backward()\n        scaler.step(optimizer)\n"
            "        scaler.update()\n",
        )
        .replace(
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    scaler = torch.cuda.amp.GradScaler()\n",
        )
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert (
        '        mixed_precision="fp16" if torch.cuda.is_available() and not (args.device == "cpu")'
        ' else "no",\n        cpu=args.device == "cpu",\n'
    ) in output
