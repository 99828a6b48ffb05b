"""How a program's helper modules reach the accelerator (see `migrator/program.py` and
docs/programs.md for why a parameter): each helper function that reads the free name
`accelerator` gets it as a keyword-only parameter, and every call of it in the program passes
`accelerator=accelerator`; then a check that every file sees the accelerator it reads and no
helper creates one. Edits are made on the cut-back files' text at `ast` positions.
"""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.analysis.syntax.imports import dotted_name
from migrator.engine import parse
from migrator.program.classes import base_names, reach_in_classes
from migrator.program.files import ProgramError, ProgramFile
from migrator.program.imports import program_names, search_path
from migrator.program.text_edits import (
    ACCELERATOR,
    apply_inserts,
    argument_insert,
    binds,
    has_param,
    parameter_insert,
    reads_free,
)


def reach_accelerator(
    texts: list[str], files: list[ProgramFile], needy: dict[int, set[str]]
) -> list[str]:
    """Each helper function that reads the free name `accelerator` gets it as a keyword-only
    parameter, and every call of it in the program passes `accelerator=accelerator` (to a
    fixed point: a helper calling such a function now reads it too). `needy` is filled with
    those definitions, per file number (a script outside the program calling one of them
    refuses it: `program_outside.py`, checked by the run)."""

    bases = base_names([file.tree for file in files])
    for _ in range(len(files) * 8):
        changed = False
        for number in range(1, len(files)):
            texts[number], classes = reach_in_classes(texts[number], files[number].path, bases)
            if classes - needy.get(number, set()):
                needy.setdefault(number, set()).update(classes)
                changed = True
            tree = parse(texts[number])
            for name in _functions_reading_accelerator(tree, files[number].path):
                if name not in needy.setdefault(number, set()):
                    needy[number].add(name)
                    changed = True
        texts = _pass_accelerator(texts, files, needy)
        if not changed:
            return texts
    return texts


def check_reach(
    texts: list[str], files: list[ProgramFile], needy: dict[int, set[str]] | None = None
) -> None:
    """Every file that reads `accelerator` sees one: a helper through its parameters, the
    entry through its own binding; no helper creates one at its top level (see the module
    docstring); and no call by name of a helper that now takes the accelerator goes without
    it (a name reached in a way the import reading missed would raise a TypeError on every
    run). A program edited otherwise is refused, never written."""
    wanting = set().union(*(needy or {}).values())
    for number in [*range(1, len(files)), 0]:  # a helper's own creation is the cause to name
        text, file = texts[number], files[number]
        tree = parse(text)
        _check_calls_pass_it(tree, file, wanting - _local_definitions(tree, needy, number))
        module_binds = _module_binds(tree, ACCELERATOR)
        if number and module_binds and not _module_binds(file.tree, ACCELERATOR):
            raise ProgramError(
                f"the accelerator would be created at the top level of {file.path.name}, not "
                "in the entry; migrate this program by hand"
            )
        if not module_binds and any(reads_free(node, ACCELERATOR) for node in tree.body):
            raise ProgramError(
                f"{file.path.name} would use an accelerator it cannot see; migrate this "
                "program by hand"
            )


def _local_definitions(tree: ast.Module, needy, number: int) -> set[str]:
    """Top-level definitions of this file that do not take the accelerator (a name clash)."""
    own = (needy or {}).get(number, set())
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {n.name for n in tree.body if isinstance(n, kinds) and n.name not in own}


def _check_calls_pass_it(tree: ast.Module, file: ProgramFile, names: set[str]) -> None:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in names
            and not any(k.arg in (ACCELERATOR, None) for k in node.keywords)
        ):
            raise ProgramError(
                f"`{node.func.id}` now takes the accelerator, but the call at line "
                f"{node.lineno} of {file.path.name} could not be given it; migrate this "
                "program by hand"
            )


def _module_binds(tree: ast.Module, name: str) -> bool:
    """Whether top-level code (not a def's or class's body) assigns `name`, or a function
    declares it `global` (MIG001's `global accelerator` when its arguments are the owner's)."""
    if any(isinstance(node, ast.Global) and name in node.names for node in ast.walk(tree)):
        return True
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def _functions_reading_accelerator(tree: ast.Module, path: Path) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if reads_free(node, ACCELERATOR):
                names.append(node.name)
        elif isinstance(node, ast.ClassDef) and reads_free(node, ACCELERATOR):
            raise ProgramError(
                f"the accelerator is needed in class `{node.name}` of {path.name} (line "
                f"{node.lineno}); pass it to the class by hand"
            )
        elif reads_free(node, ACCELERATOR) and not binds(node, ACCELERATOR):
            raise ProgramError(
                f"the accelerator is needed at the top level of {path.name} (line "
                f"{node.lineno}); migrate this file by hand"
            )
    return names


def _pass_accelerator(
    texts: list[str], files: list[ProgramFile], needy: dict[int, set[str]]
) -> list[str]:
    """The parameter on each needy function, the argument at each of its calls."""
    imported_as = _imported_names(files, needy)
    result = []
    for number, text in enumerate(texts):
        tree = parse(text)
        inserts: list[tuple[int, str]] = []
        own = needy.get(number, set())
        names = own | imported_as.get(number, set())
        called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in tree.body:
                if node.name in own and not has_param(node, ACCELERATOR):
                    inserts.append(parameter_insert(text, node))
            elif _calls_one_of(node, names):
                inserts.append(argument_insert(text, node))
            elif _named(node, names) and id(node) not in called:
                raise ProgramError(
                    f"`{dotted_name(node)}` needs the accelerator but is used as a value in "
                    f"{files[number].path.name} (line {node.lineno}), where no call can pass "
                    "it; migrate this program by hand"
                )
        result.append(apply_inserts(text, inserts))
    return result


def _named(node: ast.AST, names: set[str]) -> bool:
    return (
        isinstance(node, (ast.Name, ast.Attribute))
        and isinstance(node.ctx, ast.Load)
        and dotted_name(node) in names
    )


def _calls_one_of(node: ast.AST, names: set[str]) -> bool:
    """A call `f(...)` of one of `names` that does not pass the accelerator yet."""
    return (
        isinstance(node, ast.Call)
        and dotted_name(node.func) in names
        and not any(k.arg == ACCELERATOR for k in node.keywords)
    )


def _imported_names(files: list[ProgramFile], needy: dict[int, set[str]]) -> dict[int, set[str]]:
    """Per file, the names under which its calls reach a needy function or class of another
    file: `train_one_epoch`, `fit` (`from engine import train_one_epoch as fit`),
    `engine.train_one_epoch` (`import engine`)."""
    modules = [(file.path, file.tree) for file in files]
    found: dict[int, set[str]] = {}
    for number, names in enumerate(
        program_names(modules, search_path(files[0].path, files[0].tree))
    ):
        for local, (owner, name) in names.items():
            if owner != number and name in needy.get(owner, set()):
                found.setdefault(number, set()).add(local)
    return found
