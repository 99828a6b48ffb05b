"""MIG902 on CUDA_VISIBLE_DEVICES (SPEC §3b.6): a training program that chooses its GPUs by
writing the variable would, under a launcher, give every process the same GPUs (or, written
after the Accelerator took a GPU, the write does nothing): reported, and the file left as it
is; reading it, other variables, and programs that do not train are not concerned."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text

TRAINING = """\
import os
from os import environ

import torch

{line}
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    model(torch.randn(4, 2)).sum().backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "line",
    [
        'os.environ["CUDA_VISIBLE_DEVICES"] = "1"',
        "os.environ['CUDA_VISIBLE_DEVICES'] = ','.join(map(str, [0, 1]))",
        'environ["CUDA_VISIBLE_DEVICES"] = "2"',
        'os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")',
        'os.environ.update(CUDA_VISIBLE_DEVICES="3")',
        'os.environ.update({"CUDA_VISIBLE_DEVICES": "3"})',
        'os.putenv("CUDA_VISIBLE_DEVICES", "1")',
        'if torch.cuda.device_count() > 1:\n    os.environ["CUDA_VISIBLE_DEVICES"] = "1"',
    ],
)
def test_choosing_the_visible_gpus_is_reported_and_the_file_left(line):
    output, findings = migrate_text(TRAINING.format(line=line))
    assert output is None
    assert [f.code for f in findings if f.level != "note"] == ["MIG902"]
    assert "CUDA_VISIBLE_DEVICES" in findings[0].message


@pytest.mark.parametrize(
    "line",
    [
        'print(os.environ.get("CUDA_VISIBLE_DEVICES"))',
        'os.environ["OMP_NUM_THREADS"] = "1"',
        'visible = os.environ["CUDA_VISIBLE_DEVICES"] if "CUDA_VISIBLE_DEVICES" in os.environ else ""',
    ],
)
def test_reading_it_or_setting_other_variables_is_no_choice(line):
    output, findings = migrate_text(TRAINING.format(line=line))
    assert output is not None
    assert "MIG902" not in [f.code for f in findings]


def test_a_program_that_does_not_train_may_choose_its_gpus():
    source = 'import os\n\nimport torch\n\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\nprint(torch.nn.Linear(2, 1)(torch.randn(1, 2)))\n'
    output, findings = migrate_text(source)
    assert output is None and findings == []


def test_a_list_of_gpus_set_before_torch_is_imported_is_kept_with_a_note():
    """Before torch is imported, `"0,1,8,9"` only narrows what every process sees: each still
    takes its own GPU among them. A note says how many processes fit; one GPU for N processes,
    or a write after torch is imported, stays reported."""
    head = 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "{gpus}"\n\n'
    body = TRAINING.replace("import os\nfrom os import environ\n\n", "").format(line="")
    output, findings = migrate_text(head.format(gpus="0,1,8,9") + body)
    assert output is not None, [f.message for f in findings]
    assert 'os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,8,9"' in output
    [note] = [f for f in findings if f.code == "MIG902"]
    assert note.level == "note" and "launch at most 4 processes per machine" in note.message
    output, findings = migrate_text(head.format(gpus="1") + body)
    assert output is None and any(f.code == "MIG902" and f.level != "note" for f in findings)
    after = body.replace(
        "import torch\n", 'import torch\nimport os\nos.environ["CUDA_VISIBLE_DEVICES"] = "2,3"\n', 1
    )
    output, findings = migrate_text(after)
    assert output is None and any(f.code == "MIG902" and f.level != "note" for f in findings)


@pytest.mark.parametrize("gpus", ["0,1", "0,1,2,3,4,5,6,7"])
def test_the_first_gpus_listed_among_the_imports_after_torch_are_kept(gpus):
    """`import torchvision` (or torch) then `os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"` among
    the imports (h8 VAE, h9 RocWeather): importing torch starts no CUDA, and the first GPUs in
    order are the ones every process sees wherever the Accelerator is made."""
    body = TRAINING.replace("import os\nfrom os import environ\n\n", "").format(line="")
    source = body.replace(
        "import torch\n",
        f'import os\nimport torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "{gpus}"\nimport math\n',
        1,
    )
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    [note] = [f for f in findings if f.code == "MIG902"]
    count = len(gpus.split(","))
    assert note.level == "note" and f"launch at most {count} processes" in note.message
