"""Callers outside the program. A helper function (or class) that now takes the accelerator
as a keyword-only parameter (`program_reach.py`) fails with a TypeError when a script that is
not part of this program calls it as before: `eval.py` calling `utils.get_rank()` beside the
`main.py` whose program changed `utils.py`. The project's other Python files are read
(under the project root, at most MAX_FILES of them in MAX_FOLDERS folders, virtual
environments and hidden folders skipped), and a call there of such a definition without
`accelerator=` refuses the program, naming the file and the line.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from migrator.analysis.syntax.imports import dotted_name
from migrator.engine import MigrationError
from migrator.program.files import ProgramError, ProgramFile, read_file
from migrator.program.imports import local_imports, program_names, search_path

MAX_FILES = 400
MAX_FOLDERS = 2000  # a project root found far up (a .git at home) is not walked whole
SKIPPED = {"node_modules", "site-packages", "__pycache__", "build", "dist"}


def check_outside_callers(
    files: list[ProgramFile], needy: dict[int, set[str]], exempt: set[Path]
) -> None:
    """ProgramError naming the first call, in a project file outside the program and not in
    `exempt` (resolved paths), of a definition in `needy` without `accelerator=`."""
    if not any(needy.get(number) for number in range(1, len(files))):
        return
    roots = search_path(files[0].path, files[0].tree)
    members = {file.path.resolve(): number for number, file in enumerate(files)}
    for path in project_files(roots[-1]):
        if path in members or path in exempt:
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        if not any(item.path in members for item in local_imports(tree, path, roots)):
            continue
        try:
            outsider = read_file(path)
        except (OSError, MigrationError):
            continue
        modules = [(outsider.path, outsider.tree), *((f.path, f.tree) for f in files)]
        names = program_names(modules, roots)[0]
        wanting = {local for local, (owner, name) in names.items()
                   if name in needy.get(owner - 1, set())}  # fmt: skip
        for node in ast.walk(outsider.tree):
            if (
                isinstance(node, ast.Call)
                and dotted_name(node.func) in wanting
                and not any(keyword.arg == "accelerator" for keyword in node.keywords)
            ):
                raise ProgramError(
                    f"`{dotted_name(node.func)}` would need the accelerator, but "
                    f"{_shown(path, roots[-1])} (line {node.lineno}), which is not part of this "
                    "program, calls it without one; migrate these files by hand"
                )


def project_files(root: Path):
    count = 0
    for visited, (folder, dirs, names) in enumerate(os.walk(root)):
        if visited > MAX_FOLDERS:
            return
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED
                         and not (Path(folder) / d / "pyvenv.cfg").exists())  # fmt: skip
        for name in sorted(names):
            if name.endswith(".py"):
                count += 1
                if count > MAX_FILES:
                    return
                yield (Path(folder) / name).resolve()


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
