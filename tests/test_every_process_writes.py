"""Side effects wherever they run on every process (SPEC §3b.2): MIG030 makes the catalogue's
writes safe in helpers at any depth, and the soundness check refuses a migration that would
still write on every process (MIG952)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from migrator.soundness import check_output

HEAD = """\
import os
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
"""

LOOP = """
def train(model, loader, optimizer):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

MAIN = """
def main():
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    for epoch in range(2):
        train(model, loader, optimizer)
{tail}

if __name__ == "__main__":
    main()
"""


def script(helpers: str, tail: str) -> str:
    return HEAD + helpers + LOOP + MAIN.format(tail=tail)


@pytest.mark.parametrize(
    "helper, call",
    [
        ("def save_checkpoint(state, path):\n    torch.save(state, path)\n",
         "        save_checkpoint({'epoch': epoch}, 'last.pt')"),
        (("def save_checkpoint(state, path):\n    torch.save(state, path)\n\n"
          "def finish(state):\n    save_checkpoint(state, 'final.pt')\n"),
         "    finish({'model': 1})"),
        ("class Saver:\n    def save(self, state):\n        torch.save(state, 'x.pt')\n",
         "        Saver().save({'epoch': epoch})"),
    ],
)  # fmt: skip
def test_a_helper_s_torch_save_at_any_depth_goes_through_accelerator_save(helper, call):
    output, findings = migrate_text(script(helper, call))
    assert output is not None, findings
    assert "accelerator.save(state, " in output
    assert "torch.save(" not in output
    assert not check_output(output)


@pytest.mark.parametrize(
    "helper",
    [
        "def log_row(path, row):\n    with open(path, 'a') as f:\n        f.write(row)\n",
        "def log_row(path, row):\n    import json\n    json.dump(row, open(path, 'w'))\n",
        # a pathlib.Path opened to write: its mode comes first, or as `mode=`
        ("def log_row(path, row):\n    from pathlib import Path\n"
         "    with Path(path).open('a', newline='') as f:\n        f.write(row)\n"),
        ("def log_row(path, row):\n    import pathlib\n    target = pathlib.Path(path)\n"
         "    with target.open(mode='w', encoding='utf-8') as f:\n        f.write(row)\n"),
    ],
)  # fmt: skip
def test_a_helper_s_file_write_goes_under_the_main_process(helper):
    output, findings = migrate_text(script(helper, "        log_row('log.csv', str(epoch))"))
    assert output is not None, findings
    assert "    if accelerator.is_main_process:\n" in output.split("def log_row")[1]
    assert not check_output(output)


@pytest.mark.parametrize(
    "make, made",
    [
        ("os.makedirs(out_dir)", "os.makedirs(out_dir, exist_ok=True)"),
        ("os.mkdir(out_dir)", "os.makedirs(out_dir, exist_ok=True)"),
        ("if not os.path.exists(out_dir):\n        os.mkdir(out_dir)",
         "if not os.path.exists(out_dir):\n        os.makedirs(out_dir, exist_ok=True)"),
    ],
)  # fmt: skip
def test_a_folder_made_on_every_process_may_exist_already(make, made):
    source = script("", f"    out_dir = 'out'\n    {make}")
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert made in output
    assert not check_output(output)


def test_a_download_on_every_process_waits_for_the_main_process():
    source = (
        script("", "")
        .replace(
            "    model = nn.Linear(4, 1)\n",
            "    data = datasets.MNIST('data', download=True)\n    model = nn.Linear(4, 1)\n",
        )
        .replace("import os\n", "import os\nfrom torchvision import datasets\n")
    )
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert (
        "    with accelerator.main_process_first():\n"
        "        data = datasets.MNIST('data', download=True)\n"
    ) in output


@pytest.mark.parametrize(
    "save",
    [
        "    buffer = io.BytesIO()\n    torch.save(model.state_dict(), buffer)",
        "    torch.save(model.state_dict(), f'rank{accelerator_rank}.pt')",
    ],
)
def test_saves_that_write_no_shared_file_stay_on_every_process(save):
    source = "import io\n" + script("", "    accelerator_rank = 0\n" + save)
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert "    torch.save(accelerator.unwrap_model(model).state_dict(), " in output


def test_a_write_the_rules_cannot_split_refuses_the_file():
    """The argument runs the prepared model: it must run on every process, the write on
    one. MIG030 leaves it with a note; the soundness check refuses the migration."""
    source = "import numpy\n" + script("", "    numpy.save('pred.npy', model(torch.randn(2, 4)))")
    output, findings = migrate_text(source)
    assert output is None
    # the note says what to do by hand: kept; the file says once that it is left (MIG950)
    assert [(f.code, f.level) for f in findings] == [
        ("MIG030", "note"),
        ("MIG952", "warning"),
        ("MIG950", "note"),
    ]
    refusal = findings[1]
    line = source.splitlines().index("    numpy.save('pred.npy', model(torch.randn(2, 4)))") + 1
    assert (refusal.line, refusal.col) == (line, 5)
    assert "`numpy.save(...)` (a file) in `main()`" in refusal.message


def test_the_check_names_an_unguarded_write_in_a_helper():
    migrated = (
        "from runtime import Accelerator\nimport torch\naccelerator = Accelerator()\n\n"
        "def dump(x):\n    torch.save(x, 'x.pt')\n\n"
        "def main():\n    if accelerator.is_main_process:\n        dump(1)\n    dump(2)\n\n"
        "main()\n"
    )
    [finding] = check_output(migrated)
    assert finding.code == "MIG952" and "in `dump()`, called at line 11" in finding.message
    assert not check_output(migrated.replace("    dump(2)\n", ""))


@pytest.mark.parametrize(
    "read",
    [
        "    with Path('log.csv').open() as f:\n        f.read()\n",
        "    with Path('log.csv').open('r') as f:\n        f.read()\n",
        "    with Path('log.csv').open(encoding='utf-8') as f:\n        f.read()\n",
        "    from PIL import Image\n    Image.open('x.png')\n",
    ],
)  # fmt: skip
def test_a_path_opened_to_read_or_an_image_opened_is_no_write(read):
    helper = "from pathlib import Path\n\ndef show():\n" + read
    output, findings = migrate_text(script(helper, "    show()"))
    assert output is not None, findings
    assert "is_main_process" not in output.split("def show")[1].split("def train")[0]
