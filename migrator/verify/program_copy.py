"""`migrate verify` on a program of several files (`migrator/program.py`): the migrated files
are written into a temporary copy of the project's Python files, and the migrated run starts
the entry's copy there, so that it imports the migrated helper modules (and the untouched
ones beside them) exactly as the original imports its own. The user's files are never
written.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from migrator.program.imports import project_root

SKIPPED_FOLDERS = {".git", "__pycache__", ".venv", "venv", "node_modules", "site-packages"}


def migrated_program(script: Path, target: str, work_dir: Path):
    """None when `script` is one file; else (the entry's migrated copy or None when the
    program does not change, the findings rendered with their paths)."""
    from migrator.engine import Options
    from migrator.program.unit import migrate_program

    program = migrate_program(script, Options(target=target))
    if program is None:
        return None
    findings = [f.render(r.path) for r in program.results for f in r.findings]
    if not any(r.changed for r in program.results):
        return None, findings
    paths = [Path(r.path).resolve() for r in program.results]
    root = Path(os.path.commonpath([project_root(script), *(p.parent for p in paths)]))
    copy = work_dir / "program"
    copy_python_files(root, copy)
    for result, path in zip(program.results, paths):
        if result.changed:
            (copy / path.relative_to(root)).write_bytes(result.migrated)
    return copy / script.resolve().relative_to(root), findings


def copy_python_files(root: Path, copy: Path) -> None:
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if f not in SKIPPED_FOLDERS)
        target = copy / Path(folder).relative_to(root)
        for name in files:
            if name.endswith(".py"):
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(folder) / name, target / name)
