"""The migrated program verify runs: migrated in memory by `migrate`, or one made elsewhere
(`--against PATH`: by hand, by a colleague, by a code assistant), judged the same way.

`--against` takes the migrated entry script, or a folder holding the migrated program in the
original's layout (the entry at the same path below it as the original's below its project
root). A migration made elsewhere runs as itself: its own folder first on `sys.path`, so it
imports its own helper modules. Which Accelerate it runs on is read from its imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

HF_IMPORT = re.compile(
    r"^\s*(?:from\s+accelerate(?:\.\w+)*\s+import|import\s+accelerate)\b", re.MULTILINE
)


@dataclass
class MigratedProgram:
    entry: Path | None  # None: migrate changes nothing (there is nothing to compare)
    runs_as_itself: bool  # a program folder or a file of its own, not the user's path
    findings: list[str] = field(default_factory=list)


def migrated_program(
    script: Path, runtime: str, work_dir: Path, against: str | None
) -> MigratedProgram:
    """Raises ValueError with a one-line reason when there is no program to run."""
    if against is not None:
        return MigratedProgram(against_entry(script, Path(against)), True)
    from migrator.verify.program_copy import migrated_program as migrated_copy

    try:
        program = migrated_copy(script, runtime, work_dir)
    except Exception as error:  # noqa: BLE001 - reported like any migration problem
        raise ValueError(f"{script}: cannot migrate the program: {error}") from None
    if program is not None:
        return MigratedProgram(program[0], True, program[1])
    text, findings = _migrate(script, runtime)
    if text is None:
        return MigratedProgram(None, False, findings)
    path = work_dir / f"migrated_{script.name}"
    path.write_text(text, encoding="utf-8")
    return MigratedProgram(path, False, findings)


def against_entry(script: Path, against: Path) -> Path:
    if against.is_file():
        return against.resolve()
    if not against.is_dir():
        raise ValueError(f"{against}: no such file or folder (--against)")
    from migrator.program.imports import project_root

    root = project_root(script)
    try:
        relative = script.resolve().relative_to(root)
    except ValueError:
        relative = Path(script.name)
    for candidate in (against / relative, against / script.name):
        if candidate.is_file():
            return candidate.resolve()
    raise ValueError(
        f"{against}: holds no {relative} (--against takes the migrated script, or a folder "
        "with the migrated program in the original's layout)"
    )


def runtime_of(entry: Path) -> str:
    """accelerate when the migrated program imports HF Accelerate (its entry or a module
    beside it), else our runtime."""
    files = [entry, *sorted(entry.parent.glob("*.py"))[:50]]
    for path in files:
        try:
            if HF_IMPORT.search(path.read_text(encoding="utf-8", errors="replace")):
                return "accelerate"
        except OSError:
            continue
    return "runtime"


def _migrate(script: Path, target: str) -> tuple[str | None, list[str]]:
    from migrator.engine import MigrationError, Options, migrate_text

    try:
        text = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{script}: cannot read: {error}") from None
    try:
        new_text, findings = migrate_text(text, Options(target=target))
    except MigrationError as error:
        raise ValueError(f"{script}: cannot migrate: {error}") from None
    return new_text, [finding.render(str(script)) for finding in findings]
