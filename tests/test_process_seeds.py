"""MIG009 on randomness that must differ per process: a program seeding its RNGs with one
constant seeds them alike on every process (the same GAN noise, dropout masks, random batches
on each: N copies of one draw). After the prepare, process k > 0 seeds again with seed + k;
process 0 keeps the original's stream, so one process runs as the original did."""

from __future__ import annotations

import subprocess
import sys

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

GAN = """\
import random
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

{seeding}
loader = DataLoader(TensorDataset(torch.arange(32.0).view(32, 1)), batch_size=4, shuffle=True)
generator = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(generator.parameters(), lr=0.0)
noises, seen = [], []
for epoch in range(2):
    for (real,) in loader:
        noise = torch.randn(real.size(0), 2)
        loss = (generator(noise) - real).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        noises.append(round(noise.sum().item(), 6))
        seen += real.flatten().tolist()
print("noise", noises[:3])
"""

SEEDED = "manual_seed = 999\nrandom.seed(manual_seed)\ntorch.manual_seed(manual_seed)\n"
RESEED = (
    "if accelerator.process_index:  # each process draws its own randomness from here on\n"
    "    random.seed(manual_seed + accelerator.process_index)\n"
    "    torch.manual_seed(manual_seed + accelerator.process_index)\n"
)


def _migrate(seeding: str) -> tuple[str, list]:
    output, findings = migrate_text(GAN.format(seeding=seeding))
    assert output is not None, [f.message for f in findings]
    return output, [f for f in findings if f.code == "MIG009"]


def test_a_program_seeded_alike_seeds_each_process_but_the_first_again_after_the_prepare():
    output, notes = _migrate(SEEDED)
    prepare = "generator, optimizer, loader = accelerator.prepare(generator, optimizer, loader)\n"
    assert prepare + RESEED in output
    assert len(notes) == 1 and "seed every process alike" in notes[0].message


IN_MAIN = """\
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers import set_seed


def main(args):
    set_seed(args.seed)
    loader = DataLoader(TensorDataset(torch.randn(32, 2)), batch_size=4, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Linear(2, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for (x,) in loader:
        x = x + 0.1 * torch.randn_like(x)  # noise drawn while training
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    main(parser.parse_args())
"""


def test_a_seed_read_from_the_options_in_main_is_offset_there():
    output, _ = migrate_text(IN_MAIN)
    assert output is not None
    assert (
        "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "    if accelerator.process_index:  # each process draws its own randomness from here on\n"
        "        set_seed(args.seed + accelerator.process_index)\n"
    ) in output


def test_a_seeded_program_that_draws_nothing_while_training_is_not_reseeded():
    # its randomness is all set-up (the data made before the loop): nothing to decorrelate
    source = GAN.format(seeding=SEEDED).replace(
        "noise = torch.randn(real.size(0), 2)", "noise = torch.ones(real.size(0), 2)"
    )
    output, findings = migrate_text(source)
    assert output is not None
    assert "if accelerator.process_index:" not in output
    assert not any(f.code == "MIG009" for f in findings)


def test_noise_drawn_in_a_function_the_loop_calls_is_drawn_while_training():
    # like a VAE's reparameterisation, drawn one call away from the loop
    source = (
        GAN.format(seeding=SEEDED).replace(
            "noise = torch.randn(real.size(0), 2)", "noise = sample(real)"
        )
        + "\n\ndef sample(real):\n    return torch.randn(real.size(0), 2)\n"
    )
    output, _ = migrate_text(source)
    assert output is not None and RESEED in output


@pytest.mark.parametrize(
    "seeding",
    [
        "rank = 0\ntorch.manual_seed(1234 + rank)\n",  # seeded per process by the program
    ],
)
def test_no_reseeding_where_the_processes_draw_apart_already(seeding):
    output, notes = _migrate(seeding)
    assert "if accelerator.process_index:" not in output and not notes


def test_two_processes_draw_their_own_noise_and_one_process_draws_the_originals(tmp_path):
    source = GAN.format(seeding=SEEDED)
    (tmp_path / "original.py").write_text(source)
    single = subprocess.run([sys.executable, "original.py"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, check=True)  # fmt: skip
    output, _ = _migrate(SEEDED)
    each = 'open(f"drawn{accelerator.process_index}.txt", "w").write(str((noises, sorted(seen))))\n'
    (tmp_path / "migrated.py").write_text(output + each)
    launch(tmp_path / "migrated.py", tmp_path)
    drawn = [eval((tmp_path / f"drawn{rank}.txt").read_text()) for rank in range(2)]
    assert drawn[0][0] != drawn[1][0]  # each process its own noise
    assert drawn[0][0][:3] == eval(single.stdout.split("noise ", 1)[1])  # process 0: the original's
    # the shuffle still agrees: the two shards cover the data set, each epoch
    assert sorted(drawn[0][1] + drawn[1][1]) == sorted([float(v) for v in range(32)] * 2)


def test_nothing_seeded_is_seeded_again_from_where_torch_started():
    """Unseeded, torch's generators still start alike on every process (CUDA's from one
    fixed seed): torch is offset from its own starting seed (test_unseeded_randomness.py)."""
    output, findings = migrate_text(GAN.format(seeding=""))
    assert "torch.manual_seed(torch.initial_seed() + accelerator.process_index)" in output
    assert [f.code for f in findings if "starting seed" in f.message] == ["MIG009"]


PER_EPOCH = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

pairs = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_epoch({seed_param}):
    {seed}loader = DataLoader(pairs, batch_size=8, shuffle=True)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


for epoch in range(3):
    train_epoch({seed_arg})
"""


def test_no_reseed_in_a_function_that_runs_once_per_epoch():
    """The loader is built in `train_epoch()`, called once per epoch (h9 seq2seq): a reseed
    after its prepare (`initial_seed() + k`) restarted process k's stream every epoch - the
    same dropout masks each epoch. None is added, and the note says why."""
    output, findings = migrate_text(PER_EPOCH.format(seed_param="", seed="", seed_arg=""))
    assert output is not None, [f.message for f in findings]
    assert "initial_seed()" not in output and "manual_seed" not in output
    notes = [f.message for f in findings if f.code == "MIG009"]
    assert len(notes) == 1 and "`train_epoch()`, which runs in a loop" in notes[0]


def test_a_function_that_seeds_itself_at_each_call_gets_its_offset():
    output, findings = migrate_text(
        PER_EPOCH.format(
            seed_param="epoch", seed="torch.manual_seed(epoch)\n    ", seed_arg="epoch"
        )
    )
    assert output is not None, [f.message for f in findings]
    assert "torch.manual_seed(epoch + accelerator.process_index)" in output


def test_a_seed_set_once_at_module_level_gets_no_reseed_in_a_per_epoch_function():
    """`torch.manual_seed(0)` at module level, the loader prepared in `train_epoch()` (h9
    seq2seq): `manual_seed(0 + k)` after that prepare replayed process k's stream each epoch."""
    source = PER_EPOCH.format(seed_param="", seed="", seed_arg="").replace(
        "pairs = TensorDataset", "torch.manual_seed(0)\npairs = TensorDataset"
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert "process_index" not in output.split("def train_epoch")[1]
    assert any("which runs in a loop" in f.message for f in findings if f.code == "MIG009")


LIBRARY_MODEL = """\
import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from transformers import AutoTokenizer, BertForSequenceClassification

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
body = {body}
head = nn.Linear(8, 1)
model = nn.ModuleDict({{"body": body, "head": head}})
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(head(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "body",
    [
        'BertForSequenceClassification.from_pretrained("bert-base-uncased")',
        "torchvision.models.vgg11()",
        "torchvision.models.mobilenet_v3_small(weights=None)",
        "nn.TransformerEncoderLayer(8, 2)",
        "nn.LSTM(8, 8, num_layers=2, dropout=0.2)",
    ],
)
def test_dropout_inside_a_library_model_is_seeded_apart(body):
    """A model of a library that trains with dropout (transformers' models, torchvision's
    classifiers with a dropout head, torch's transformer layers, a recurrent net asked for
    dropout): on CUDA every process would draw the same masks (h12 review: BERT and GPT-2
    fine-tunes)."""
    output, findings = migrate_text(LIBRARY_MODEL.format(body=body))
    assert output is not None, [f.message for f in findings]
    assert "torch.manual_seed(torch.initial_seed() + accelerator.process_index)" in output
    assert any(f.code == "MIG009" and "starting seed" in f.message for f in findings)


@pytest.mark.parametrize(
    "body",
    [
        "torchvision.models.resnet18()",
        "nn.LSTM(8, 8, num_layers=2)",
        "nn.TransformerEncoderLayer(8, 2, dropout=0.0)",
        "nn.Linear(8, 8)",  # and a tokenizer: no model of transformers'
    ],
)
def test_library_layers_without_dropout_are_not_reseeded(body):
    output, findings = migrate_text(LIBRARY_MODEL.format(body=body))
    assert output is not None, [f.message for f in findings]
    assert "manual_seed" not in output
    assert not any(f.code == "MIG009" for f in findings)


def test_a_seed_of_another_file_of_the_program_is_not_copied_into_this_one(tmp_path):
    """The entry seeds at module level (`random.seed(SEED)`), the Trainer of another module
    prepares: its reseed cannot name the entry's `SEED` or `random` (h12 review: a NER
    program's ranks >= 1 died with a NameError), so it offsets torch from where it started."""
    from migrator.engine import Options
    from migrator.program.unit import migrate_program

    (tmp_path / "trainer.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\n\n\n"
        "class Trainer:\n"
        "    def __init__(self, model):\n"
        "        self.model = model\n"
        "        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n\n"
        "    def train(self, data):\n"
        "        loader = DataLoader(data, batch_size=4, shuffle=True)\n"
        "        for x, y in loader:\n"
        "            loss = torch.nn.functional.mse_loss(self.model(x), y)\n"
        "            self.optimizer.zero_grad()\n"
        "            loss.backward()\n"
        "            self.optimizer.step()\n"
    )
    (tmp_path / "main.py").write_text(
        "import random\n\nimport torch\nfrom torch.utils.data import TensorDataset\n\n"
        "from trainer import Trainer\n\n"
        "SEED = 3\nrandom.seed(SEED)\ntorch.manual_seed(SEED)\n"
        "model = torch.nn.Sequential(torch.nn.Dropout(0.2), torch.nn.Linear(4, 1))\n"
        "Trainer(model).train(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)))\n"
    )
    program = migrate_program(tmp_path / "main.py", Options())
    assert program is not None
    texts = {r.path.rsplit("/", 1)[-1]: (r.migrated or r.source).decode() for r in program.results}
    trainer = texts["trainer.py"]
    assert "torch.manual_seed(torch.initial_seed() + self.accelerator.process_index)" in trainer
    assert "SEED" not in trainer and "random." not in trainer
