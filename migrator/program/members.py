"""Which files form a program, and whether its entry drives their step.

The members: the entry and the project modules it imports (transitively) that hold a step
call, the modules on the import chain between them, and the modules defining the base
classes of their classes. The entry drives the program when its code runs a training step of
the program (its own, or a helper's through its calls): read from the joined module's
analysis, or, where the files cannot be joined, from the definitions it calls.
"""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.analysis.model.helper_library import HelperLibrary
from migrator.analysis.syntax.imports import dotted_name
from migrator.engine import MigrationError
from migrator.program.files import ProgramFile, read_file
from migrator.program.imports import local_imports, program_names, search_path

MAX_FILES = 32  # a program joins at most this many files (the entry and its training helpers)
STEP_CALLS = frozenset({"backward", "zero_grad", "init_process_group"})
MAX_SCANNED = 400  # project modules read to find them


def members(
    entry: Path, first: ProgramFile | None = None, others: HelperLibrary | None = None
) -> list[ProgramFile]:
    """The entry and the project modules it imports (transitively) that hold a step call
    (`_steps`: where the training step lives), with the modules on the import chain between
    them (`loop.fit` passing the objects to `steps.training_step`): entry first, then in
    import order. Files that cannot be read or parsed are left out (reported on their own).
    `others` gets the modules reached but not joined, under the names they are imported by
    (`utils`, `models.tester`): what their helpers do is read there, not rewritten."""
    start = first or read_file(entry)
    roots = search_path(entry, start.tree)
    parsed = {start.path.resolve(): start}
    parent: dict[Path, Path | None] = {start.path.resolve(): None}
    spelled: dict[Path, set[str]] = {}  # the names each module is imported by
    order = [start.path.resolve()]
    queue = [start]
    while queue and len(parsed) < MAX_SCANNED:
        current = queue.pop(0)
        for imported in local_imports(current.tree, current.path, roots):
            spelled.setdefault(imported.path, set()).add(imported.module)
            if imported.path in parent:
                continue
            parent[imported.path] = current.path.resolve()
            try:
                member = read_file(imported.path)
            except (OSError, MigrationError):
                continue
            parsed[imported.path] = member
            order.append(imported.path)
            queue.append(member)
    chosen = {order[0]}
    for path in order[1:]:
        if _steps(parsed[path].tree):
            while path is not None and path not in chosen:
                chosen.add(path)
                path = parent[path]
    pending = list(chosen)
    while pending:  # the modules defining the base classes of the chosen ones' classes
        current = parsed[pending.pop()]
        for path in _base_modules(current, roots):
            if path in parsed and path not in chosen:
                chosen.add(path)
                pending.append(path)
    selected = [parsed[path] for path in order if path in chosen]
    if others is not None:
        for path in order:
            if path not in chosen:
                for name in sorted(spelled.get(path, ())):
                    others.add(name, parsed[path].tree)
    return selected[:MAX_FILES]


def _base_modules(file: ProgramFile, roots: list[Path]) -> list[Path]:
    """The project modules whose classes `file`'s classes derive from (`class Trainer(
    BaseTrainer)` after `from .base_trainer import BaseTrainer`, `class T(base.Trainer)`
    after `import base`): a Trainer's `self.optimizer` made in its base's `__init__`."""
    bases = {
        dotted_name(base)
        for node in ast.walk(file.tree)
        if isinstance(node, ast.ClassDef)
        for base in node.bases
    }
    roots_named = {name.split(".")[0] for name in bases if name}
    found = []
    for item in local_imports(file.tree, file.path, roots):
        imported = set(item.names) or {item.module.split(".")[-1], item.module.split(".")[0]}
        if imported & roots_named and item.path not in found:
            found.append(item.path)
    return found


def _steps(tree: ast.AST) -> bool:
    """Whether a module holds part of a training step: a `.backward(...)` or `.zero_grad(...)`
    call (DeiT's and MAE's engines step through a loss-scaler object, without a backward), or
    the native-DDP set-up the migration replaces (`utils.init_distributed_mode(args)` calling
    `dist.init_process_group`: left out, it would start a second process group beside the
    Accelerator's)."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in STEP_CALLS
        for node in ast.walk(tree)
    )


def entry_steps(facts, entry: ProgramFile) -> bool:
    """Whether the entry's code (its lines of the joined module) runs a backward or calls
    what runs one, or holds a training loop."""
    lines = range(entry.start_line, entry.start_line + entry.lines)
    return any(site.node.lineno in lines for site in facts.step_sites) or any(
        loop.node.lineno in lines for loop in facts.training_loops
    )


def calls_steps(files: list[ProgramFile]) -> bool:
    """Whether the entry calls a function or class of another file of the program that runs a
    step (a `.backward()`/`.zero_grad()` in its body, or a call of such a definition of its
    module by name): what says it drives them where the program cannot be analysed as one
    module."""
    stepping: list[set[str]] = []
    for file in files:
        definitions = {node.name: node for node in file.tree.body if isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}  # fmt: skip
        found = {name for name, node in definitions.items() if _steps(node)}
        grown = True
        while grown:  # `train()` calling `train_one_epoch()`, which steps
            more = {name for name, node in definitions.items() if name not in found and any(
                isinstance(call, ast.Call) and dotted_name(call.func) in found
                for call in ast.walk(node))}  # fmt: skip
            found |= more
            grown = bool(more)
        stepping.append(found)
    modules = [(file.path, file.tree) for file in files]
    names = program_names(modules, search_path(files[0].path, files[0].tree))[0]
    for node in ast.walk(files[0].tree):
        if isinstance(node, ast.Call):
            owner, name = names.get(dotted_name(node.func) or "", (0, ""))
            if owner != 0 and name in stepping[owner]:
                return True
    return False
