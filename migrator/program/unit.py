"""A program spread over modules, migrated as one unit.

Research code keeps the objects in `main.py` and the training step in a helper module
(`engine.train_one_epoch(model, criterion, data_loader, optimizer, device, epoch)`, a Trainer
class in `train_util.py`). A file of such a program is never migrated alone: a prepare in the
entry without `accelerator.backward` in the helper, or the other way round, is half a migration.

How: the entry and the project modules it imports that hold a step (found through
`analysis/program_imports.py`, transitively) are joined into one module, helpers first and the
entry last, each file ending with a marker statement of its own. The analysis and the rules see one module, so
roles flow from `main()` into `train_one_epoch` through its call site exactly as between two
functions of one file, and every edit is made where its object lives. The edited text is cut
back into files at the markers; then, per file, the accelerator's reach (`program_reach.py`)
and the imports (`from runtime import Accelerator`, `import torch`, imports the edits retired).
See docs/programs.md.

How a helper module reaches the accelerator: as a keyword-only parameter `accelerator` of each
of its functions that uses it, passed as `accelerator=accelerator` by every call in the
program. Not a second `Accelerator()` in the helper: HF Accelerate shares the process state
(`AcceleratorState`: device, process group, mixed-precision mode) between instances, but not
the instance's own state: the GradScaler of fp16 (the prepared optimizer steps with its
preparer's scaler, a second instance's `backward` scales with another), the gradient
accumulation counter, the prepared objects, the trackers. A module-level `Accelerator()` also
runs at import time, before the entry's `Accelerator(mixed_precision=...)`, and HF then refuses
the entry's (the state is already initialised with other settings). Passing the instance is
what HF's own multi-file examples and ported research code do (`train_one_epoch(...,
accelerator)`), and it behaves the same on our runtime and on `--target accelerate`.
A helper class gets it at construction (`program_classes.py`); where the accelerator would
have to reach module-level code of a helper, the program is refused with a finding naming the
place.

Findings are reported in the file and at the line they belong to. A program whose files
cannot be joined safely (two files binding the same top-level name differently) is refused.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from migrator.analysis.model.helper_library import HelperLibrary
from migrator.analysis.syntax.index import ModuleIndex
from migrator.analysis.syntax.points import PROGRAM_FILE_MARKER
from migrator.engine import (
    FileResult,
    MigrationError,
    Options,
    check_parses,
    edit_imports,
    encode,
    parse,
    render_migration,
)
from migrator.findings import Finding
from migrator.import_edits import add_module_imports
from migrator.program.files import ProgramError, ProgramFile
from migrator.program.findings import CODE, assign, finding_at, in_program, unchanged
from migrator.program.helper_draws import helper_draws, helper_random_layers
from migrator.program.helper_effects import helper_effects
from migrator.program.imports import program_names, search_path
from migrator.program.joinable import joinable_problem
from migrator.program.members import calls_steps, entry_steps, members
from migrator.program.outside import check_outside_callers
from migrator.program.reach import check_reach, reach_accelerator
from migrator.source import Source

MARKER = PROGRAM_FILE_MARKER + " = {}"


@dataclass
class ProgramResult:
    entry: Path
    files: list[ProgramFile] = field(default_factory=list)
    results: list[FileResult] = field(default_factory=list)  # one per file, entry first
    # per file number, the definitions that now take the accelerator (`program_reach.py`)
    needy: dict[int, set[str]] = field(default_factory=dict)
    # the entry's code runs a training step of the program (its own or a helper's, through
    # its calls): the program is the entry's, and its helpers are never migrated alone
    drives: bool = False

    @property
    def paths(self) -> list[Path]:
        return [f.path for f in self.files]


def migrate_program(entry: Path, options: Options, first: ProgramFile | None = None):
    """The program of `entry` migrated as one unit, or None when the entry imports no project
    module with a training step (a single file: the engine's business)."""
    library = HelperLibrary()  # the modules reached but not joined: helpers read, not edited
    try:
        files = members(entry, first, library)
    except (OSError, MigrationError):  # the entry itself: reported by the per-file run
        return None
    if len(files) < 2:
        return None
    program = ProgramResult(entry, files)
    try:
        problem = joinable_problem(files)
        if problem is not None:
            raise ProgramError(problem)
        joined = _join(files)
        tree = parse(joined)
        output, context, findings = render_migration(
            joined, tree, options, index=_joined_index(tree, joined, files), library=library
        )
    except ProgramError as error:
        program.drives = calls_steps(files)
        program.results = unchanged(files, [[finding_at(files[0], 1, str(error))]])
        return program
    except MigrationError as error:
        program.drives = calls_steps(files)
        program.results = unchanged(files, [[finding_at(files[0], 1, f"joined program: {error}")]])
        return program
    program.drives = context is not None and entry_steps(context.facts, files[0])
    per_file = assign(files, in_program(findings, files))
    if output is None:
        program.results = unchanged(files, per_file)
        return program

    texts = _split(output, files)
    try:
        texts = reach_accelerator(texts, files, program.needy)
        check_reach(texts, files, program.needy)
    except ProgramError as error:
        per_file[0].append(finding_at(files[0], 1, str(error)))
        program.results = unchanged(files, per_file)
        return program
    program.results = [
        _finish(file, text, context, found) for file, text, found in zip(files, texts, per_file)
    ]
    return program


def _joined_index(tree: ast.Module, joined: str, files: list[ProgramFile]):
    """The joined module's index, knowing the other names its calls use for the program's
    definitions (`engine.train_one_epoch` after `import engine`, `g` after `from engine import
    train_one_epoch as g`), so that roles flow through those calls too. A name two files use
    for different definitions is left out."""

    index = ModuleIndex(tree, Source(joined))
    modules = [(file.path, file.tree) for file in files]
    aliases: dict[str, str | None] = {}
    for names in program_names(modules, search_path(files[0].path, files[0].tree)):
        for local, (_, name) in names.items():
            if local != name:
                aliases[local] = name if aliases.get(local, name) == name else None
    index.add_aliases({local: name for local, name in aliases.items() if name is not None})
    members = {file.path.resolve() for file in files}
    roots = search_path(files[0].path, files[0].tree)
    for file in files:
        found = helper_effects(file.tree, file.path, members, roots)
        index.imports.helper_effects.update({k: v for k, v in found.items() if k not in aliases})
        drawn = helper_draws(file.tree, file.path, members, roots)
        index.imports.helper_draws.update({k: v for k, v in drawn.items() if k not in aliases})
        layers = helper_random_layers(file.tree, file.path, members, roots)
        index.imports.helper_random_layers.update(
            {k: v for k, v in layers.items() if k not in aliases}
        )
    return index


def refuse_for_outsiders(program: ProgramResult, exempt: set[Path]) -> None:
    """The program left as it is, with a finding in the entry, when a script outside it (not
    in `exempt`: entries of the run's other programs, which the run checks against this one)
    calls a helper that now needs the accelerator (`program_outside.py`)."""

    if not any(result.changed for result in program.results):
        return
    try:
        check_outside_callers(program.files, program.needy, exempt)
    except ProgramError as error:
        per_file = [[f for f in r.findings if f.code != CODE] for r in program.results]
        per_file[0].append(finding_at(program.files[0], 1, str(error)))
        program.results = unchanged(program.files, per_file)


def _finish(file: ProgramFile, text: str, context, findings: list[Finding]) -> FileResult:

    result = FileResult(path=str(file.path), source=file.data, findings=findings)
    if text == file.text:
        return result
    text = _drop_misplaced_import(text, file.text, context)
    text = _add_missing_imports(text, context)
    text, tree = edit_imports(text, _PerFile(context))
    if tree is None:
        check_parses(text)
    if text != file.text:
        result.migrated = encode(text, file.encoding)
    return result


@dataclass
class _PerFile:
    """The import requests of the program's rule context, for one file: retired imports go
    where that file no longer uses them; added modules are handled by `_add_missing_imports`."""

    context: object
    extra_imports: tuple = ()

    @property
    def unused_imports(self):
        return self.context.unused_imports


def _target_names(context) -> list[str]:
    """What MIG001's import line brings from the target: `Accelerator`, and the names rules
    asked for with it (`PartialState`, `DistributedDataParallelKwargs`)."""
    return list(dict.fromkeys(["Accelerator", *context.accelerator_imports]))


def _drop_misplaced_import(text: str, original: str, context) -> str:
    """MIG001 puts `from runtime import Accelerator` (with the names rules asked for) after
    the joined module's first imports, which are a helper's: gone from a file that did not
    have the line before; `_add_missing_imports` puts what each file reads where it reads it."""
    source = "accelerate" if context.target == "accelerate" else "runtime"
    line = f"from {source} import {', '.join(_target_names(context))}"
    lines = text.splitlines(keepends=True)
    if line not in (item.rstrip("\r\n") for item in original.splitlines()):
        kept = [item for item in lines if item.rstrip("\r\n") != line]
        if len(kept) != len(lines):
            return "".join(kept)
    return text


def _add_missing_imports(text: str, context) -> str:
    """`from runtime import Accelerator` (and the other target names it reads) and the
    modules rules asked for (`import torch`) in the file that reads them without having them."""

    tree = parse(text)
    bound, read = _module_names(tree)
    source = "accelerate" if context.target == "accelerate" else "runtime"
    wanted = [name for name in _target_names(context) if name in read and name not in bound]
    if wanted:
        text = _insert_import(text, tree, f"from {source} import {', '.join(wanted)}")
        tree = parse(text)
    modules = [module for module, _ in context.extra_imports if module.split(".")[0] in read]
    missing = [module for module in modules if module.split(".")[0] not in bound]
    if missing:
        text = add_module_imports(text, missing, tree)
    return text


def _insert_import(text: str, tree: ast.Module, line: str) -> str:
    """`line` after the file's leading imports (after a docstring), as MIG001 places it."""

    source = Source(text)
    body = tree.body
    position = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        position = 1
    while position < len(body) and isinstance(body[position], (ast.Import, ast.ImportFrom)):
        position += 1
    newline = source.newline
    if position == 0:
        return f"{line}{newline}{newline}{text}" if text.strip() else f"{line}{newline}"
    end = source.end(body[position - 1])
    line_end = text.find("\n", end)
    cut = len(text) if line_end < 0 else line_end + 1
    head = text[:cut] if line_end >= 0 else text + newline
    return f"{head}{line}{newline}{text[cut:]}"


def _module_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound anywhere in the module by imports, defs, assignments; names read)."""
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
    return bound, read


# -- joining and splitting ---------------------------------------------------------------


def _joined_order(files: list[ProgramFile]) -> list[ProgramFile]:
    """The helpers first, the entry last: the entry's imports are then the module's last, so
    a module-level `accelerator = Accelerator()` (placed after the last import) lands in the
    entry, and the helpers' definitions come before the code that runs them, as at run time."""
    return [*files[1:], files[0]]


def _join(files: list[ProgramFile]) -> str:
    parts = []
    line = 1
    for number, file in enumerate(_joined_order(files)):
        text = file.text if file.text.endswith(("\n", "\r")) or not file.text else file.text + "\n"
        file.start_line = line
        file.lines = text.count("\n")
        parts.append(text)
        parts.append(MARKER.format(number) + "\n")
        line += file.lines + 1
    return "".join(parts)


def _split(output: str, files: list[ProgramFile]) -> list[str]:
    """The edited text of each file, in the order of `files` (entry first)."""
    texts: dict[int, str] = {}
    rest = output
    for number, file in enumerate(_joined_order(files)):
        marker = MARKER.format(number)
        at = _marker_at(rest, marker)
        if at < 0:
            raise RuntimeError(f"internal error: program file marker {number} lost")
        text = rest[:at]
        rest = rest[at + len(marker) :]
        rest = rest[rest.find("\n") + 1 :] if "\n" in rest else ""
        if not file.text.endswith(("\n", "\r")) and file.text and text.endswith("\n"):
            text = text[:-1]
        texts[id(file)] = text
    return [texts[id(file)] for file in files]


def _marker_at(text: str, marker: str) -> int:
    at = 0
    while True:
        at = text.find(marker, at)
        if at < 0 or at == 0 or text[at - 1] in "\n\r":
            return at
        at += 1
