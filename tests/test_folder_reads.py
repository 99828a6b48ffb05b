"""A folder every process lists (`ImageFolder(root)`, `os.listdir(d)`, `glob.glob(...)`,
`Path(d).glob(...)`) after the main process alone wrote files into it is waited for: every
process reaches `wait_for_everyone()` before the listing (h10 review, a notebook: images cut
on the main process were read by every process through `ImageFolder`, half written). The
folder is the one the written path is built under (`os.path.join(d, f)`, `d + "/" + f`,
`d / f`, `f"{d}/{f}"`), or the static start of both paths."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

PROGRAM = """\
import glob
import os
from pathlib import Path

import numpy as np
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, TensorDataset

OUT = "crops"
@WRITER@

for k in range(8):
    write(k)
@READ@
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

WRITERS = {
    "join": """
def write(k):
    torchvision.utils.save_image(torch.rand(3, 8, 8), os.path.join(OUT, f"{k}.png"))
""",
    "f-string": """
def write(k):
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(f"{OUT}/{k}.png")
""",
    "concatenation": """
def write(k):
    np.save(OUT + "/" + str(k) + ".npy", np.zeros(4))
""",
    "path": """
def write(k):
    torch.save(torch.zeros(4), Path(OUT) / "tensors" / f"{k}.pt")
""",
    "static start": """
def write(k):
    np.save("crops/deep/" + str(k) + ".npy", np.zeros(4))
""",
}

READS = {
    "ImageFolder": "images = torchvision.datasets.ImageFolder(root=OUT)",
    "listdir": "names = sorted(os.listdir(OUT))",
    "glob join": 'names = glob.glob(os.path.join(OUT, "*"))',
    "glob static": 'names = glob.glob("crops/*")',
    "Path glob": 'names = list(Path(OUT).rglob("*"))',
}


@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_process_waits_before_listing_a_folder_the_main_process_wrote_into(writer, read):
    source = PROGRAM.replace("@WRITER@", WRITERS[writer]).replace("@READ@", READS[read])
    out, findings = migrate_text(source)
    assert out is not None, findings
    assert "if accelerator.is_main_process:" in out or "accelerator.save(" in out, out
    assert f"accelerator.wait_for_everyone()\n{READS[read]}\n" in out, out


HELPER = """\
import os

import numpy as np
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader


def cut(source, save_path, name):
    array = np.asarray(Image.open(source))
    for k in range(4):
        Image.fromarray(array[k * 8 : (k + 1) * 8]).save(@PATH@)


for kind in ["cats", "dogs"]:
    target = "/tmp/tiles/" + kind
    os.makedirs(target, exist_ok=True)
    cut("raw/" + kind + ".png", target, kind)

dataset = torchvision.datasets.ImageFolder(@ROOT@)
loader = DataLoader(dataset, batch_size=4, shuffle=True)
model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x.flatten(1)[:, :8]), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "path",
    [
        'save_path + "/" + name + f"{k}.png"',
        'os.path.join(save_path, f"{name}{k}.png")',
        'f"{save_path}/{name}_{k}.png"',
    ],
)
@pytest.mark.parametrize("root", ['"/tmp/tiles/"', 'root="/tmp/tiles"', '"/tmp"'])
def test_a_helper_writing_under_its_parameter_is_waited_for_before_the_folder_is_read(path, root):
    out, findings = migrate_text(HELPER.replace("@PATH@", path).replace("@ROOT@", root))
    assert out is not None, findings
    assert "        if accelerator.is_main_process:\n" in out, out
    expected = (
        f"accelerator.wait_for_everyone()\n\ndataset = torchvision.datasets.ImageFolder({root})"
    )
    assert expected in out, out


@pytest.mark.parametrize("root", ['"/tmp/other"', '"/tmp/tiles/cats/x"', "root=elsewhere"])
def test_a_folder_nothing_was_written_into_is_not_waited_for(root):
    source = HELPER.replace("@PATH@", 'save_path + "/" + name + f"{k}.png"')
    out, findings = migrate_text(source.replace("@ROOT@", root))
    assert out is not None, findings
    assert "wait_for_everyone" not in out, out


def test_a_folder_listed_before_the_writes_into_it_is_not_waited_for():
    writes = "for k in range(8):\n    np.save(os.path.join(OUT, f'{k}.npy'), np.zeros(4))\n"
    source = PROGRAM.replace("@WRITER@", "").replace("@READ@", "")
    source = source.replace(
        "for k in range(8):\n    write(k)\n", f"old = os.listdir(OUT)\n{writes}"
    )
    out, findings = migrate_text(source)
    assert out is not None, findings
    assert "    if accelerator.is_main_process:\n        np.save(" in out, out
    assert "wait_for_everyone" not in out, out


def test_a_folder_listed_through_a_function_of_the_file_is_waited_for():
    source = PROGRAM.replace("@WRITER@", WRITERS["f-string"]).replace(
        "@READ@", "def count(folder):\n    return len(os.listdir(folder))\n\n\nn = count(OUT)"
    )
    out, findings = migrate_text(source)
    assert out is not None, findings
    assert "accelerator.wait_for_everyone()\n\n\nn = count(OUT)\n" in out, out
