"""Callers a migrated file does not see. A definition that now prepares what its callers pass
in (`def train(model, loader)` preparing both, a Trainer whose `__init__` prepares the loader it
receives: MIG006's note, `Finding.prepares_for`) is right only when those callers are migrated
with it. A caller in another file of the project that is not (a hand-written DDP `main.py`
beside `trainer.py`, an entry whose program was refused) keeps its own set-up: its loader
already split by a `DistributedSampler` is split again by the prepare (each process trains on
1/N² of the data), its model wrapped in DDP is wrapped again, or it runs the helper's prepared
objects where it expects its own. The file (or the program holding it) is left as it is, naming
the caller.

The project's Python files are read as `outside.py` reads them, plus the files the run was
given; an import names the file by its dotted path (`from ddp.trainer import Trainer` names
`…/ddp/trainer.py` wherever the project starts; its first part may name a package folder
cloned under another name), relative imports from the importer's package. Tests (`tests/`, `test_*.py`) call helpers with plain objects on one process and do
not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.analysis.syntax.imports import dotted_name
from migrator.program.imports import project_root
from migrator.program.outside import project_files


class Callers:
    """The project files a run may read, each parsed once."""

    def __init__(self, given: list[Path]) -> None:
        self.given = [path.resolve() for path in given if path.suffix == ".py"]
        self._trees: dict[Path, ast.Module | None] = {}
        self._texts: dict[Path, bytes] = {}

    def first_call(
        self, path: Path, names: set[str], members: set[Path]
    ) -> tuple[Path, int, str] | None:
        """(file, line, name called) of the first call, in a project file outside `members`,
        of a definition of `path` named in `names`."""
        path = path.resolve()
        seen: set[Path] = set()
        for candidate in [*project_files(_search_root(path)), *self.given]:
            if candidate in seen or candidate in members or _is_test(candidate):
                continue
            seen.add(candidate)
            text = self._text(candidate)
            if not any(name.encode() in text for name in names):
                continue
            tree = self._tree(candidate)
            if tree is None:
                continue
            called = _called_names(tree, candidate, path, names)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and dotted_name(node.func) in called:
                    return candidate, node.lineno, called[dotted_name(node.func)]
        return None

    def _text(self, path: Path) -> bytes:
        if path not in self._texts:
            try:
                self._texts[path] = path.read_bytes()
            except OSError:
                self._texts[path] = b""
        return self._texts[path]

    def _tree(self, path: Path) -> ast.Module | None:
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(self._text(path))
            except (SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]


def _search_root(path: Path) -> Path:
    """The project root; with no marker, the folder holding the file's top package (`lib/`
    with an `__init__.py` is imported from the folder above it)."""
    root = project_root(path)
    if root != path.parent:
        return root
    while (root / "__init__.py").is_file() and root.parent != root:
        root = root.parent
    return root


def _is_test(path: Path) -> bool:
    return (
        path.name.startswith("test_")
        or path.stem.endswith("_test")
        or any(part in ("tests", "test") for part in path.parent.parts)
    )


def _called_names(tree: ast.Module, importer: Path, target: Path, names: set[str]) -> dict:
    """The names `tree`'s code calls `target`'s definitions in `names` by -> the definition:
    `Trainer` after `from pkg.trainer import Trainer`, `T` after `... import Trainer as T`,
    `trainer.Trainer` after `import pkg.trainer as trainer` or `from pkg import trainer`."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _names_file(alias.name, 0, importer, target):
                    local = alias.asname or alias.name
                    found.update({f"{local}.{name}": name for name in names})
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if _names_file(module, node.level, importer, target):
                for alias in node.names:
                    if alias.name in names:
                        found[alias.asname or alias.name] = alias.name
                continue
            for alias in node.names:  # `from pkg import trainer`
                dotted = f"{module}.{alias.name}" if module else alias.name
                if _names_file(dotted, node.level, importer, target):
                    local = alias.asname or alias.name
                    found.update({f"{local}.{name}": name for name in names})
    return found


def _names_file(dotted: str, level: int, importer: Path, target: Path) -> bool:
    """Whether the module `dotted` (relative at `level`) imported by `importer` is `target`."""
    if not dotted:
        return False
    parts = dotted.split(".")
    if target.name == "__init__.py":
        target_parts = [*target.parent.parts]
    else:
        target_parts = [*target.parent.parts, target.stem]
    if level:
        package = importer.parent
        for _ in range(level - 1):
            package = package.parent
        return [*package.parts, *parts] == target_parts
    if target == importer or len(parts) > len(target_parts):
        return False
    tail = target_parts[-len(parts) :]
    if tail == parts:
        return True
    # `pseudoESM.trainer` for `<clone>/trainer.py` where the clone's folder, a package, is
    # installed (or cloned) under another name
    package = Path(*target_parts[: len(target_parts) - len(parts) + 1])
    return len(parts) > 1 and tail[1:] == parts[1:] and (package / "__init__.py").is_file()
