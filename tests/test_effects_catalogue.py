"""The catalogue of side effects (analysis/catalogue/effects.py): what writes, what is made
safe, what is each process's own."""

from __future__ import annotations

import ast

import pytest

from migrator.analysis.catalogue.effects import effect_of
from migrator.analysis.syntax.imports import ImportTable

IMPORTS = (
    "import os, shutil, torch, wandb, logging\nimport numpy as np\n"
    "import matplotlib.pyplot as plt\nfrom torchvision import datasets\n"
    "from torchvision.utils import save_image\nfrom pathlib import Path\n"
    "from torch.utils.tensorboard import SummaryWriter\n"
)


def classify(call: str, values=None):
    tree = ast.parse(IMPORTS + call)
    table = ImportTable()
    for node in tree.body:
        if isinstance(node, ast.Import):
            table.add_import(node)
        elif isinstance(node, ast.ImportFrom):
            table.add_import_from(node)
    expr = tree.body[-1].value
    effect = effect_of(expr, table, values)
    return effect.kind if effect is not None else None


@pytest.mark.parametrize(
    "call",
    [
        "torch.save(state, 'ckpt.pt')",
        "torch.save(obj=state, f=path)",
        "np.save('w.npy', w)",
        "plt.savefig('loss.png')",
        "fig.savefig(out)",
        "save_image(x, 'grid.png')",
        "df.to_csv('log.csv')",
        "model.save_pretrained(out_dir)",
        "open('log.txt', 'w')",
        "open(path, mode='ab')",
        "os.makedirs(out_dir)",
        "os.remove(old)",
        "shutil.copyfile(src, 'best.pt')",
        "Path(out).mkdir(parents=True)",
        "logging.FileHandler('train.log')",
    ],
)
def test_writes(call):
    assert classify(call) == "write"


@pytest.mark.parametrize(
    "call", ["SummaryWriter('runs')", "wandb.init(project='p')", "wandb.log({'loss': 1})"]
)
def test_trackers(call):
    assert classify(call) == "tracker"


@pytest.mark.parametrize(
    "call",
    ["datasets.MNIST('data', train=True, download=True)", "torch.hub.load('repo', 'model')"],
)
def test_downloads(call):
    assert classify(call) == "download"


@pytest.mark.parametrize(
    "call",
    [
        "open('config.json')",
        "open(path, 'rb')",
        "os.makedirs(out_dir, exist_ok=True)",
        "Path(out).mkdir(parents=True, exist_ok=True)",
        "torch.save(state, f'ckpt_rank{rank}.pt')",
        "np.save(os.path.join(out, f'{args.local_rank}.npy'), w)",
        "torch.save(state, io.BytesIO())",
        "datasets.MNIST('data', train=True, download=False)",
        "torch.load('ckpt.pt')",
    ],
)
def test_no_effect_or_each_process_its_own(call):
    assert classify(call) is None


def test_a_save_into_a_name_bound_to_an_in_memory_buffer_is_no_file():
    buffer = ast.parse("io.BytesIO()").body[0].value
    assert classify("torch.save(state, buffer)", values=lambda name: [buffer]) is None
    assert classify("torch.save(state, buffer)", values=lambda name: []) == "write"
