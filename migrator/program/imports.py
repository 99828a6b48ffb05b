"""Which project files a module imports: `import utils`, `from engine import train_one_epoch`,
`from .engine import evaluate`, `from util.misc import save_on_master`, `from . import misc`.

A module name is looked up the way Python finds it when the entry script runs
(`python main.py` puts the entry's folder first on `sys.path`), then from the project root
(the nearest folder above the entry with a pyproject.toml, setup.py, setup.cfg or .git), so a
script under `scripts/` finds the project's package as `pip install -e .` would. Relative
imports are resolved against the importing file's package. Anything not found there (torch,
numpy, the standard library) is not part of the program.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from migrator.analysis.syntax.imports import dotted_name

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


@dataclass(frozen=True)
class LocalImport:
    """An import statement of `importer` that names the project file `path`."""

    importer: Path
    path: Path
    module: str  # as written: `engine`, `util.misc`, `.engine`
    names: tuple[str, ...]  # `from m import a, b`: (a, b); `import m`: ()
    line: int


def project_root(entry: Path) -> Path:
    """The nearest folder at or above the entry's with a project marker; else the entry's."""
    start = entry.resolve().parent
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in ROOT_MARKERS):
            return folder
    return start


def search_path(entry: Path, tree: ast.Module | None = None) -> list[Path]:
    """Where absolute imports of the program are looked up, first match wins: the folders the
    entry puts on `sys.path` itself (`sys.path.insert(0, str(Path(__file__).parent.parent))`,
    `sys.path.append(os.path.join(os.path.dirname(__file__), "src"))`), the entry's folder,
    the project root. `tree`: the entry's, when the caller has it."""
    first = entry.resolve().parent
    root = project_root(entry)
    if tree is None:
        try:
            tree = ast.parse(entry.read_bytes())
        except (OSError, SyntaxError, ValueError):
            tree = None
    ahead, behind = sys_path_edits(tree, entry.resolve()) if tree is not None else ([], [])
    above = package_parents(tree, first) if tree is not None else []
    found: list[Path] = []
    for folder in [*ahead, first, *above, *behind, root]:
        if folder not in found and folder.is_dir():
            found.append(folder)
    return found


def package_parents(tree: ast.Module, folder: Path, levels: int = 3) -> list[Path]:
    """The folders above `folder` from which the entry imports its own package by name: in
    `ddp/main.py`, `from ddp.trainer import Trainer` is written for `python -m ddp.main` run
    from the folder holding `ddp/` (or that folder on PYTHONPATH), found here though no
    project marker (.git, pyproject.toml) says where the project starts."""
    first_parts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            first_parts.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            first_parts.add(node.module.split(".")[0])
    found: list[Path] = []
    for ancestor in [folder, *folder.parents][:levels]:
        if ancestor.name in first_parts and ancestor.parent != ancestor:
            found.append(ancestor.parent)
    return found


def sys_path_edits(tree: ast.Module, entry: Path) -> tuple[list[Path], list[Path]]:
    """(folders put first, folders put last) by the entry's module-level `sys.path.insert(0,
    ...)` / `sys.path.append(...)` calls whose folder is known from `__file__` alone."""
    ahead: list[Path] = []
    behind: list[Path] = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in ("insert", "append")
            and dotted_name(call.func.value) == "sys.path"
            and call.args
        ):
            continue
        folder = _file_path(call.args[-1], entry)
        if folder is not None:
            (ahead if call.func.attr == "insert" else behind).append(folder)
    return ahead, behind


def _file_path(expr: ast.expr, entry: Path) -> Path | None:
    """The path `expr` computes from `__file__` (the entry): `Path(__file__).resolve().parent`,
    `/ "src"`, `os.path.dirname(os.path.abspath(__file__))`, `os.path.join(x, "..")`,
    `str(...)`; None for anything else."""
    if isinstance(expr, ast.Name) and expr.id == "__file__":
        return entry
    if isinstance(expr, ast.Attribute) and expr.attr == "parent":
        inner = _file_path(expr.value, entry)
        return inner.parent if inner is not None else None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div):
        inner = _file_path(expr.left, entry)
        part = expr.right.value if isinstance(expr.right, ast.Constant) else None
        return _joined(inner, part)
    if not isinstance(expr, ast.Call):
        return None
    name = dotted_name(expr.func) or ""
    method = expr.func.attr if isinstance(expr.func, ast.Attribute) else ""
    if method in ("resolve", "absolute") and not expr.args:
        return _file_path(expr.func.value, entry)
    if not expr.args:
        return None
    first = expr.args[0]
    if name in ("Path", "pathlib.Path", "str", "os.fspath") or name.endswith(
        ("path.abspath", "path.realpath", "path.normpath")
    ):
        return _file_path(first, entry) if len(expr.args) == 1 else None
    if name.endswith("path.dirname") and len(expr.args) == 1:
        inner = _file_path(first, entry)
        return inner.parent if inner is not None else None
    if name.endswith("path.join"):
        found = _file_path(first, entry)
        for part in expr.args[1:]:
            found = _joined(found, part.value if isinstance(part, ast.Constant) else None)
        return found
    return None


def _joined(folder: Path | None, part) -> Path | None:
    if folder is None or not isinstance(part, str) or part.startswith("/"):
        return None
    return (folder / part).resolve() if part == ".." or "/.." in part else folder / part


def module_file(folder: Path, dotted: str) -> Path | None:
    """`a.b` under `folder`: a/b.py, else the package a/b/__init__.py."""
    if not dotted:
        return None
    base = folder.joinpath(*dotted.split("."))
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def local_imports(tree: ast.Module, path: Path, roots: list[Path]) -> list[LocalImport]:
    """The imports of `tree` (the module at `path`, anywhere in it) that name project files."""
    found: list[LocalImport] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _absolute(alias.name, roots)
                if target is not None:
                    found.append(LocalImport(path, target, alias.name, (), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            found.extend(_from_import(node, path, roots))
    return found


def _from_import(node: ast.ImportFrom, path: Path, roots: list[Path]) -> list[LocalImport]:
    written = "." * node.level + (node.module or "")
    names = tuple(alias.name for alias in node.names)
    if node.level:
        package = path.resolve().parent
        for _ in range(node.level - 1):
            package = package.parent
        folders = [package]
        dotted = node.module or ""
    else:
        folders = roots
        dotted = node.module or ""
    found: list[LocalImport] = []
    for folder in folders:
        base = module_file(folder, dotted) if dotted else _package_init(folder)
        for name in names:  # `from pkg import module` imports a file of its own
            sub = module_file(folder, f"{dotted}.{name}" if dotted else name)
            if sub is not None:
                spelled = f"{written}{name}" if written.endswith(".") else f"{written}.{name}"
                found.append(LocalImport(path, sub, spelled, (), node.lineno))
        if base is not None:
            found.append(LocalImport(path, base, written, names, node.lineno))
        if found:
            return found
    return found


def _package_init(folder: Path) -> Path | None:
    init = folder / "__init__.py"
    return init.resolve() if init.is_file() else None


def _absolute(dotted: str, roots: list[Path]) -> Path | None:
    for folder in roots:
        found = module_file(folder, dotted)
        if found is not None:
            return found
    return None


def program_names(
    modules: list[tuple[Path, ast.Module]], roots: list[Path]
) -> list[dict[str, tuple[int, str]]]:
    """Per module of a program, the names its code calls the program's top-level functions
    and classes by, each -> (the defining module's number, the definition's own name):
    `g` for `from engine import train_one_epoch as g`, `engine.train_one_epoch` for
    `import engine`, `u.save_on_master` for `import util.misc as u` or `from util import misc
    as u`."""
    by_path = {path.resolve(): number for number, (path, _) in enumerate(modules)}
    defined = [_top_level_definitions(tree) for _, tree in modules]
    result: list[dict[str, tuple[int, str]]] = []
    for path, tree in modules:
        names: dict[str, tuple[int, str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    owner = by_path.get(_absolute(alias.name, roots))
                    if owner is not None:
                        local = alias.asname or alias.name
                        names.update({f"{local}.{n}": (owner, n) for n in defined[owner]})
            elif isinstance(node, ast.ImportFrom):
                for item in _from_import(node, path, roots):
                    owner = by_path.get(item.path)
                    if owner is not None:
                        names.update(_from_names(node, item, owner, defined[owner]))
        result.append(names)
    return result


def _from_names(node: ast.ImportFrom, item: LocalImport, owner: int, defined: set[str]) -> dict:
    found = {}
    for alias in node.names:
        local = alias.asname or alias.name
        if item.names and alias.name == "*":  # `from train import *`: its public definitions
            found.update({n: (owner, n) for n in defined if not n.startswith("_")})
        elif item.names and alias.name in defined:  # `from engine import f as g`
            found[local] = (owner, alias.name)
        elif not item.names and item.module.rsplit(".", 1)[-1] == alias.name:
            # `from util import misc [as u]`: the module's definitions as `u.name`
            found.update({f"{local}.{n}": (owner, n) for n in defined})
    return found


def _top_level_definitions(tree: ast.Module) -> set[str]:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in tree.body if isinstance(node, kinds)}
