"""A block the migration wraps around a statement that opens a cell (`with
accelerator.main_process_first():` around a download, `if accelerator.is_main_process:` around
a write) goes into that cell with its body: a header left at the end of the cell before would
make neither cell parse (it was an internal error: "the migration of cell N does not parse on
its own")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from bulk_support import REPO

from migrator.engine import Options
from migrator.notebook import migrate_notebook
from migrator.notebook.magics import Masker
from migrator.notebook.program import CodeCell, Program

BLOCKS = REPO / "fixtures" / "notebooks" / "cell_opening_blocks.in.ipynb"


def _program(*sources: str) -> Program:
    cells = [CodeCell(number, source, as_list=True) for number, source in enumerate(sources, 1)]
    masker = Masker()
    for cell in cells:
        cell.masked = masker.mask(cell.source)
    return Program(cells, masker)


def test_a_with_header_goes_to_the_cell_of_its_body():
    program = _program("import data\n", "train = data.fetch(download=True)\nloader = make(train)\n")
    migrated = (
        "import data\naccelerator = Accelerator()\n"
        "with accelerator.main_process_first():\n"
        "    train = data.fetch(download=True)\nloader = make(train)\n"
    )
    assert program.split(migrated) == {
        1: "import data\naccelerator = Accelerator()\n",
        2: "with accelerator.main_process_first():\n"
        "    train = data.fetch(download=True)\nloader = make(train)\n",
    }


def test_nested_headers_and_their_comment_follow_the_body():
    program = _program("x = 1\n", "write(x)\n")
    migrated = (
        "x = 1\n# written once\nif accelerator.is_main_process:\n    if x:\n        write(x)\n"
    )
    assert program.split(migrated) == {
        1: "x = 1\n",
        2: "# written once\nif accelerator.is_main_process:\n    if x:\n        write(x)\n",
    }


def test_an_inserted_statement_that_opens_no_block_still_ends_the_earlier_cell():
    program = _program("x = 1\n", "y = 2\n")
    migrated = "x = 1\nready = True  # a colon at the end:\ny = 2\n"
    assert program.split(migrated) == {
        1: "x = 1\nready = True  # a colon at the end:\n",
        2: "y = 2\n",
    }


def test_a_header_over_a_body_in_its_own_cell_stays():
    program = _program("for i in range(2):\n    step(i)\n")
    migrated = "for i in range(2):\n    if accelerator.is_main_process:\n        step(i)\n"
    assert program.split(migrated) == {1: migrated}


def test_the_fixture_migrates_and_every_changed_cell_parses():
    result = migrate_notebook(BLOCKS.read_bytes(), BLOCKS.name, Options())
    assert result.error is None, result.error
    cells = [c for c in json.loads(result.migrated)["cells"] if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in cells]
    assert sources[2].startswith("with accelerator.main_process_first():\n    digits = Digits(")
    assert sources[5].startswith("if accelerator.is_main_process:\n    with open(")
    assert not any(s.rstrip().endswith(":") for s in sources)


@pytest.mark.slow
def test_the_migrated_cells_run_on_one_and_two_processes(tmp_path):
    """The golden output's cells as one script: the dataset is written once (the main process
    first), training runs, and the files after it are written by one process."""
    out = BLOCKS.with_name("cell_opening_blocks.out.ipynb")
    cells = [c for c in json.loads(out.read_bytes())["cells"] if c["cell_type"] == "code"]
    script = tmp_path / "notebook.py"
    script.write_text("\n".join("".join(c["source"]) for c in cells) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    launch = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", str(script)]
    for command in ([sys.executable, str(script)], launch):
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.count("epochs 2") == 1, done.stdout
        assert (tmp_path / "data" / "digits.pt").exists()
        assert len((tmp_path / "history.txt").read_text().split()) == 2
        assert (tmp_path / "epoch_1.txt").exists()
