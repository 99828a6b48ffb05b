"""Which migrated program verify runs: `--against` a file or a program folder."""

from __future__ import annotations

import pytest

from migrator.verify.migration import against_entry, runtime_of


def test_against_a_file_runs_that_file(tmp_path):
    (tmp_path / "train.py").write_text("")
    mine = tmp_path / "train_accelerate.py"
    mine.write_text("")
    assert against_entry(tmp_path / "train.py", mine) == mine.resolve()


def test_against_a_folder_finds_the_entry_in_the_originals_layout(tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "src" / "train.py").write_text("")
    migrated = tmp_path / "migrated"
    (migrated / "src").mkdir(parents=True)
    (migrated / "src" / "train.py").write_text("")
    assert (
        against_entry(project / "src" / "train.py", migrated)
        == (migrated / "src" / "train.py").resolve()
    )


def test_against_a_folder_holding_the_entry_at_its_top(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "train.py").write_text("")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "train.py").write_text("")
    assert against_entry(tmp_path / "a" / "train.py", tmp_path / "b").parent.name == "b"


def test_against_a_folder_without_the_entry_says_what_it_looked_for(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no train.py"):
        against_entry(tmp_path / "train.py", tmp_path / "empty")
    with pytest.raises(ValueError, match="no such file or folder"):
        against_entry(tmp_path / "train.py", tmp_path / "absent.py")


def test_the_accelerate_a_migration_runs_on_is_read_from_its_imports(tmp_path):
    hf = tmp_path / "hf" / "train.py"
    hf.parent.mkdir()
    hf.write_text("import torch\nfrom accelerate import Accelerator\n")
    ours = tmp_path / "ours" / "train.py"
    ours.parent.mkdir()
    ours.write_text("from runtime import Accelerator\n# from accelerate import nothing\n")
    helper = tmp_path / "helper" / "train.py"
    helper.parent.mkdir()
    helper.write_text("from setup import make_accelerator\n")
    (helper.parent / "setup.py").write_text("import accelerate.utils\n")
    assert runtime_of(hf) == "accelerate"
    assert runtime_of(ours) == "runtime"
    assert runtime_of(helper) == "accelerate"
