"""Program entries found from the import graph (issue 27 gap 6): a script with no backward of
its own that drives a step of the project modules it imports (`trainer.train_step(...)` on an
instance of their class, a `fit()` a base class in another module defines, behind a
`sys.path.insert` of the project folder) is a program's entry. `migrate .` migrates such a
program whole, as `migrate <entry>` does; a helper is never migrated alone while its entry
imports it, and a refused program says why in its entry instead of a helper's "nothing in this
file calls" (fixtures/programs/trainer_*; the CLI over programs is test_programs.py)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from migrator.program.files import ProgramFile
from migrator.program.imports import search_path, sys_path_edits
from migrator.program.joinable import joinable_problem
from tests.test_programs import PROGRAMS, ROOT, entry_of, findings_of, run_cli, tree_files

ENTRIES = ["trainer_instance_step", "trainer_base_class_on_path", "trainer_step_refused"]


@pytest.mark.parametrize("name", ENTRIES)
def test_a_bulk_run_finds_the_entry_and_migrates_its_program(name, tmp_path, monkeypatch, capsys):
    fixture = PROGRAMS / name
    work = tmp_path / "program"
    shutil.copytree(fixture / "in", work)
    _code, report = run_cli(work, monkeypatch, capsys, ".")
    expected = fixture / "out" if (fixture / "out").is_dir() else fixture / "in"
    assert tree_files(work) == tree_files(expected)
    declared = fixture / "findings"
    assert findings_of(report) == (
        sorted(declared.read_text().split()) if declared.exists() else []
    )
    programs = {item["path"]: item.get("program") for item in report["files"]}
    assert programs[entry_of(fixture)] == entry_of(fixture)


def test_a_script_that_imports_a_helper_without_running_its_step_is_no_entry(
    tmp_path, monkeypatch, capsys
):
    """predict.py imports trainer.py for a metric: its program would not drive the step, so
    it keeps its own (empty) result and main.py's program is the only one."""
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "trainer_instance_step" / "in", work)
    _code, report = run_cli(work, monkeypatch, capsys, ".", mode="check")
    programs = {item["path"]: item.get("program") for item in report["files"]}
    assert programs == {"main.py": "main.py", "trainer.py": "main.py", "predict.py": None}
    assert report["summary"]["programs"] == 1


def test_a_refused_program_names_its_reason_in_the_entry(tmp_path, monkeypatch, capsys):
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "trainer_step_refused" / "in", work)
    _code, report = run_cli(work, monkeypatch, capsys, ".", mode="check")
    messages = {item["path"]: [f["message"] for f in item["findings"]] for item in report["files"]}
    refusal, left = messages["train.py"]
    assert "`self.optimizer.step()` at line 15 of trainer.py" in refusal
    assert left.startswith("the program of train.py (train.py, trainer.py) is left as it is")
    assert not any("nothing in this file calls" in m for ms in messages.values() for m in ms)
    left = "part of the program of train.py, which is not migrated (see the finding there)"
    assert messages["trainer.py"] == [f"{left}; this file is left as it is"]


def test_the_trainer_receives_the_accelerator_where_it_is_made():
    out = (PROGRAMS / "trainer_instance_step" / "out" / "main.py").read_text()
    assert "    trainer = Trainer(model, optimizer, device, accelerator=accelerator)\n" in out
    trainer = (PROGRAMS / "trainer_instance_step" / "out" / "trainer.py").read_text()
    assert "        self.accelerator.backward(loss)\n" in trainer


@pytest.mark.parametrize(
    "line",
    [
        "sys.path.insert(0, str(Path(__file__).resolve().parent.parent))",
        "sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))",
        'sys.path.append(os.path.join(os.path.dirname(__file__), ".."))',
        "sys.path.insert(0, str(Path(__file__).parent.parent / 'src'))",
    ],
)
def test_folders_a_script_puts_on_its_path(line, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "scripts").mkdir()
    entry = tmp_path / "scripts" / "train.py"
    entry.write_text(f"import os\nimport sys\nfrom pathlib import Path\n\n{line}\n")
    ahead, behind = sys_path_edits(ast.parse(entry.read_text()), entry.resolve())
    wanted = tmp_path / "src" if "src" in line else tmp_path
    assert [p.resolve() for p in ahead + behind] == [wanted.resolve()]
    assert wanted.resolve() in [p.resolve() for p in search_path(entry)]


def test_a_path_not_known_from_the_file_alone_is_not_guessed(tmp_path):
    entry = tmp_path / "train.py"
    entry.write_text(
        "import os, sys\nsys.path.insert(0, os.environ['CODE'])\nsys.path.append('.')\n"
    )
    assert sys_path_edits(ast.parse(entry.read_text()), entry) == ([], [])


def _file(path: Path, text: str) -> ProgramFile:
    path.write_text(text)
    return ProgramFile(path=path, data=text.encode(), text=text, encoding="utf-8",
                       tree=ast.parse(text))  # fmt: skip


def test_setting_an_attribute_or_an_item_of_a_module_is_no_second_binding(tmp_path):
    """`os.environ[...] = ...` in one file and `import os` in another: one `os`."""
    entry = _file(
        tmp_path / "main.py",
        textwrap.dedent("""\
        import os
        import torch
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        torch.backends.cudnn.benchmark = True
    """),
    )
    helper = _file(tmp_path / "engine.py", "import os\nimport torch\n")
    assert joinable_problem([entry, helper]) is None
    clash = _file(tmp_path / "utils.py", "os = None\n")
    assert "`os` is defined both" in joinable_problem([entry, clash])


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, steps",
    [("trainer_instance_step", r"epoch \d steps 4 loss"), ("trainer_base_class_on_path", None)],
)
def test_the_migrated_programs_train_on_two_processes(name, steps, tmp_path):
    import re

    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / name / "out", work)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    launch = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", entry_of(PROGRAMS / name)]
    done = subprocess.run(launch, cwd=work, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    if steps is not None:  # 64 samples, batch 8, two processes: 4 steps each, printed once
        assert len(re.findall(steps, done.stdout)) == 3, done.stdout
    else:  # 96 samples, batch 12: 4 batches on each process (the driver cannot see the
        # Trainer's accelerator: printed once, through the process-wide state)
        assert done.stdout.count("epoch 2 batches 4 loss") == 1, done.stdout


@pytest.mark.parametrize("fixture", sorted(p for p in PROGRAMS.iterdir() if (p / "in").is_dir()),
                         ids=lambda p: p.name)  # fmt: skip
def test_no_unchanged_file_with_a_training_step_is_silent_in_a_bulk_run(
    fixture, tmp_path, monkeypatch, capsys
):
    """Never silent (issue 27): in `migrate .` over a program, every file left unchanged that
    has a backward and an optimizer step, and the entry of a program left unchanged, says
    why."""
    work = tmp_path / "program"
    shutil.copytree(fixture / "in", work)
    _code, report = run_cli(work, monkeypatch, capsys, ".", mode="check")
    migrated = {item.get("program") for item in report["files"] if item["changed"]}
    for item in report["files"]:
        if item["changed"] or item.get("error"):
            continue
        text = (work / item["path"]).read_text()
        stepping = ".backward(" in text and ".step(" in text
        refused_entry = item.get("program") == item["path"] and item["path"] not in migrated
        assert not (stepping or refused_entry) or item["findings"], item["path"]
