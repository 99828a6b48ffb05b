"""Calls of a program's helpers that now take the accelerator (migrator/program/reach.py):
every call passes it, however the helper's name reached the caller (`from train import *`
too, golden fixture programs/star_import_helper), and a call the import reading cannot tie
to its definition refuses the program instead of leaving a call that raises TypeError on
every run (SPEC §3b.7: helpers keep working for their callers)."""

from __future__ import annotations

import shutil

from migrator.engine import Options
from migrator.program.unit import migrate_program
from tests.test_programs import PROGRAMS

STAR = PROGRAMS / "star_import_helper" / "in"


def _package_program(tmp_path, init: str, entry_import: str):
    """main.py importing `fit` through a package lib/ whose __init__ re-exports it."""
    (tmp_path / "lib").mkdir()
    shutil.copy(STAR / "utils.py", tmp_path / "lib" / "utils.py")
    train = (STAR / "train.py").read_text().replace("from utils import", "from .utils import")
    (tmp_path / "lib" / "train.py").write_text(train)
    (tmp_path / "lib" / "__init__.py").write_text(init)
    main = (STAR / "main.py").read_text().replace("from train import *\nfrom utils import *\n", "")
    (tmp_path / "main.py").write_text(
        main.replace("import torch\n", f"import torch\n{entry_import}\n", 1)
    )
    return migrate_program(tmp_path / "main.py", Options())


def _text(program, name: str) -> str:
    for path, result in zip(program.paths, program.results):
        if path.name == name:
            return (result.migrated or result.source).decode()
    raise AssertionError(name)


def test_a_helper_reached_through_a_star_import_is_passed_the_accelerator(tmp_path):
    shutil.copytree(STAR, tmp_path, dirs_exist_ok=True)
    program = migrate_program(tmp_path / "main.py", Options())
    assert all(result.changed for result in program.results[:2])
    assert "fit(model, optimizer, loader, 3, device, accelerator=accelerator)" in _text(
        program, "main.py"
    )
    assert "def fit(model, optimizer, loader, epochs, device, *, accelerator):" in _text(
        program, "train.py"
    )


def test_a_re_exported_helper_the_imports_do_not_reach_refuses_the_program(tmp_path):
    for init, entry_import in (
        ("from .train import fit\nfrom .utils import pick_device\n", "from lib import *"),
        ("from .train import *\nfrom .utils import *\n", "from lib import fit, pick_device"),
    ):
        shutil.rmtree(tmp_path)
        tmp_path.mkdir()
        program = _package_program(tmp_path, init, entry_import)
        assert not any(result.changed for result in program.results), entry_import
        messages = [f.message for r in program.results for f in r.findings if f.code == "MIG910"]
        assert any("`fit` now takes the accelerator" in m and "line" in m for m in messages), (
            messages
        )
