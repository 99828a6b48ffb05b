"""A download under a test of whether the data is there yet runs, with its test and what
follows it in the block (extract, move, remove the archive), under `main_process_first`: the
main process fetches and prepares the data, then the others test, find it, and skip. Wrapping
the download call alone let the others test first, download again, and extract while the main
process moved and deleted the same files (h9 UNet segmentation)."""

from __future__ import annotations

import ast

import pytest

from migrator.engine import migrate_text

SCRIPT = """\
import os
import zipfile
from pathlib import Path

import gdown
import torch
from torch.utils.data import DataLoader, TensorDataset


def fetch(root):
    if {test}:
        gdown.download("https://example.org/file", "data.zip", quiet=False)
        with zipfile.ZipFile("data.zip") as archive:
            archive.extractall(root)


fetch("data")
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

TESTS = [
    'not os.path.exists(os.path.join(root, "x.pt"))',
    "not os.path.isdir(root) or not os.listdir(root)",
    'not Path(root, "x.pt").exists()',
]


@pytest.mark.parametrize("test", TESTS)
def test_the_check_and_the_download_run_main_process_first_together(test):
    output, findings = migrate_text(SCRIPT.format(test=test))
    assert output is not None, [f.message for f in findings]
    tree = ast.parse(output)
    fetch = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "fetch")
    (outer,) = fetch.body
    assert isinstance(outer, ast.With)
    assert ast.unparse(outer.items[0].context_expr) == "accelerator.main_process_first()"
    assert isinstance(outer.body[0], ast.If)  # the test, inside the block
    assert output.count("main_process_first") == 1


def test_a_download_in_a_loop_keeps_its_own_guard():
    source = (
        SCRIPT.format(test="True")
        .replace(
            "    if True:\n", '    for name in ["a", "b"]:\n        if not os.path.exists(name):\n'
        )
        .replace("        gdown.download(", "            gdown.download(")
        .replace("        with zipfile", "            with zipfile")
        .replace("            archive.extractall(root)", "                archive.extractall(root)")
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    tree = ast.parse(output)
    fetch = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "fetch")
    assert isinstance(fetch.body[0], ast.For)  # the loop is not wrapped whole


GRAPHS = """\
import torch
@IMPORT@

dataset = @MAKE@
graph = dataset[0]
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_graph_datasets_that_fetch_when_made_are_made_on_the_main_process_first():
    """DGL's and OGB's datasets download and extract when constructed, with no `download=`
    flag (h11 review: every process fetched into one folder at once)."""
    from migrator.engine import migrate_text

    for imports, make in (
        ("from dgl.data import CoraGraphDataset", "CoraGraphDataset()"),
        (
            "from ogb.nodeproppred import DglNodePropPredDataset",
            'DglNodePropPredDataset("ogbn-arxiv")',
        ),
    ):
        out, findings = migrate_text(GRAPHS.replace("@IMPORT@", imports).replace("@MAKE@", make))
        assert out is not None, findings
        assert f"with accelerator.main_process_first():\n    dataset = {make}\n" in out, out
    out, findings = migrate_text(
        GRAPHS.replace("@IMPORT@", "from dgl.data.utils import load_graphs").replace(
            "@MAKE@", 'load_graphs("g.bin")[0]'
        )
    )
    assert out is not None and "main_process_first" not in out, out
