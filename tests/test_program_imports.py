"""Which project files an import names (migrator/analysis/program_imports.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.program.imports import (
    local_imports,
    program_names,
    project_root,
    search_path,
)


def make(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def imported(path: Path, roots: list[Path]) -> list[str]:
    tree = ast.parse(path.read_text())
    base = roots[-1]
    return sorted(
        f"{item.module} -> {item.path.relative_to(base).as_posix()}"
        for item in local_imports(tree, path, roots)
    )


def test_absolute_relative_and_package_imports(tmp_path):
    make(tmp_path, {
        "main.py": (
            "import os\nimport torch\nimport engine\nimport util.misc as utils\n"
            "from models import build\nfrom util import lr_sched\nfrom datasets import coco\n"
            "def late():\n    from engine import evaluate\n"
        ),
        "engine.py": "", "models/__init__.py": "", "util/__init__.py": "", "util/misc.py": "",
        "util/lr_sched.py": "", "datasets/__init__.py": "", "datasets/coco.py": "",
    })  # fmt: skip
    assert imported(tmp_path / "main.py", [tmp_path]) == [
        "datasets -> datasets/__init__.py",
        "datasets.coco -> datasets/coco.py",
        "engine -> engine.py",
        "engine -> engine.py",
        "models -> models/__init__.py",
        "util -> util/__init__.py",
        "util.lr_sched -> util/lr_sched.py",
        "util.misc -> util/misc.py",
    ]


def test_relative_imports_follow_the_importing_package(tmp_path):
    make(tmp_path, {
        "pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/steps.py": "",
        "pkg/sub/loop.py": "from . import helpers\nfrom ..steps import step\nfrom .missing import x\n",
        "pkg/sub/helpers.py": "",
    })  # fmt: skip
    assert imported(tmp_path / "pkg" / "sub" / "loop.py", [tmp_path]) == [
        ". -> pkg/sub/__init__.py",
        "..steps -> pkg/steps.py",
        ".helpers -> pkg/sub/helpers.py",
    ]


def test_the_project_root_is_the_nearest_marker_above_the_entry(tmp_path):
    make(tmp_path, {"setup.py": "", "scripts/train.py": "import guided.train_util\n",
                    "guided/__init__.py": "", "guided/train_util.py": ""})  # fmt: skip
    entry = tmp_path / "scripts" / "train.py"
    assert project_root(entry) == tmp_path.resolve()
    assert search_path(entry) == [(tmp_path / "scripts").resolve(), tmp_path.resolve()]
    assert imported(entry, search_path(entry)) == ["guided.train_util -> guided/train_util.py"]


def test_without_a_marker_the_entry_folder_is_the_root(tmp_path):
    make(tmp_path, {"a/train.py": "import b\n", "b.py": ""})
    entry = tmp_path / "a" / "train.py"
    assert search_path(entry) == [(tmp_path / "a").resolve()]
    assert imported(entry, search_path(entry)) == []  # python a/train.py cannot import b either


def test_the_names_calls_use_for_a_programs_definitions(tmp_path):
    """`program_names`: per module, each name its calls use for a function or class another
    module of the program defines -> (that module's number, the definition's own name)."""
    make(tmp_path, {
        "main.py": (
            "import engine\nimport util.misc\nimport util.misc as u\n"
            "from engine import train_one_epoch as fit, evaluate\nfrom util import misc as m2\n"
            "from util.misc import Scaler as NativeScaler, not_there\nimport torch\n"
        ),
        "engine.py": "def train_one_epoch():\n    pass\n\ndef evaluate():\n    pass\n",
        "util/__init__.py": "",
        "util/misc.py": "class Scaler:\n    pass\n\nVALUE = 1\n",
    })  # fmt: skip
    modules = [
        (tmp_path / name, ast.parse((tmp_path / name).read_text()))
        for name in ("main.py", "engine.py", "util/misc.py")
    ]
    names = program_names(modules, [tmp_path])
    assert names[0] == {
        "engine.train_one_epoch": (1, "train_one_epoch"),
        "engine.evaluate": (1, "evaluate"),
        "util.misc.Scaler": (2, "Scaler"),
        "u.Scaler": (2, "Scaler"),
        "fit": (1, "train_one_epoch"),
        "evaluate": (1, "evaluate"),
        "m2.Scaler": (2, "Scaler"),
        "NativeScaler": (2, "Scaler"),
    }
    assert names[1] == names[2] == {}
