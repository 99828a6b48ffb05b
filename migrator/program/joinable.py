"""Whether a program's files can be joined into one module for the analysis: one line
ending, and no top-level name bound to different things in two files."""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.program.files import ProgramFile
from migrator.source import Source


def joinable_problem(files: list[ProgramFile]) -> str | None:
    """Two files that bind one top-level name to different things would share it in the
    joined module (a `def main` in each, `utils` imported as two modules), and new code is
    written in the joined module's line ending: what refuses the program, or None."""
    endings = {Source(file.text).newline for file in files if "\n" in file.text}
    if len(endings) > 1:
        return (
            "the program's files end their lines differently (LF and CRLF): new code would not "
            "match one of them; convert them to one style first"
        )
    owners: dict[str, tuple[Path, str]] = {}
    defined = {name: file.path for file in files for name in _top_level_defs(file.tree)}
    for file in files:
        for name, meaning in _top_level_bindings(file.tree).items():
            if meaning.startswith("import ") and defined.get(name, file.path) != file.path:
                continue  # `from engine import train_one_epoch`: the definition itself
            previous = owners.get(name)
            if previous is not None and previous[1] != meaning:
                return (
                    f"`{name}` is defined both in {previous[0].name} and in {file.path.name}: "
                    "the program cannot be migrated as one unit; migrate its files by hand"
                )
            owners[name] = (file.path, meaning)
    return None


def _top_level_defs(tree: ast.Module) -> list[str]:
    return [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]


def _top_level_bindings(tree: ast.Module) -> dict[str, str]:
    """Top-level name -> what binds it (an import's target, or `def`/`class`/`=` with the
    file, which makes bindings of two files differ)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                # `import torch.nn as nn` binds what `from torch import nn` does
                found[local] = f"import {_imported(alias.name) if alias.asname else local}"
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:  # `from timm.data import Mixup` == `from timm.data.mixup ...`
                module = "." * node.level + (node.module or "")
                found[alias.asname or alias.name] = f"import {_imported(f'{module}.{alias.name}')}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = f"def {id(node)}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            # the same statement in two files (`logger = logging.getLogger(__name__)`) is one
            # meaning for the analysis; dunders (`__all__`, `__version__`) are never read by it
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in _bound_names(target):
                    if not name.startswith("__"):
                        found[name] = f"= {ast.dump(node)}"
    return found


def _imported(dotted: str) -> str:
    """What an import binds, compared by its package and its last name: a package re-exports
    its submodules' names (`timm.data.Mixup` is `timm.data.mixup.Mixup`)."""
    parts = dotted.split(".")
    return f"{parts[0]}...{parts[-1]}" if len(parts) > 1 else dotted


def _bound_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds: `a`, `a, (b, *c)`; not the object an attribute or
    an item is set on (`os.environ["X"] = ...`, `torch.backends.cudnn.benchmark = True` leave
    `os` and `torch` the modules they are)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    return []
