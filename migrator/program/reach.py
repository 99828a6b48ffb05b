"""How a program's helper modules reach the accelerator (see `migrator/program.py` and
docs/programs.md for why a parameter): each helper function that reads the free name
`accelerator` gets it as a keyword-only parameter, and every call of it in the program passes
`accelerator=accelerator`; then a check that every file sees the accelerator it reads and no
helper creates one. Edits are made on the cut-back files' text at `ast` positions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from migrator.analysis.syntax.imports import dotted_name
from migrator.engine import parse
from migrator.program.imports import program_names, search_path
from migrator.program.unit import ProgramError, ProgramFile

ACCELERATOR = "accelerator"
LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # lines as the tokenizer counts them


def reach_accelerator(
    texts: list[str], files: list[ProgramFile], needy: dict[int, set[str]]
) -> list[str]:
    """Each helper function that reads the free name `accelerator` gets it as a keyword-only
    parameter, and every call of it in the program passes `accelerator=accelerator` (to a
    fixed point: a helper calling such a function now reads it too). `needy` is filled with
    those definitions, per file number (a script outside the program calling one of them
    refuses it: `program_outside.py`, checked by the run)."""
    from migrator.program.classes import base_names, reach_in_classes

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


def check_reach(texts: list[str], files: list[ProgramFile]) -> None:
    """Every file that reads `accelerator` sees one: a helper through its parameters, the
    entry through its own binding; and no helper creates one at its top level (see the module
    docstring). A program edited otherwise is refused, never written."""
    for number in [*range(1, len(files)), 0]:  # a helper's own creation is the cause to name
        text, file = texts[number], files[number]
        tree = parse(text)
        module_binds = _module_binds(tree, ACCELERATOR)
        if number and module_binds and not _module_binds(file.tree, ACCELERATOR):
            raise ProgramError(
                f"the accelerator would be created at the top level of {file.path.name}, not "
                "in the entry; migrate this program by hand"
            )
        if not module_binds and any(_reads_free(node, ACCELERATOR) for node in tree.body):
            raise ProgramError(
                f"{file.path.name} would use an accelerator it cannot see; migrate this "
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
            if _reads_free(node, ACCELERATOR):
                names.append(node.name)
        elif isinstance(node, ast.ClassDef) and _reads_free(node, ACCELERATOR):
            raise ProgramError(
                f"the accelerator is needed in class `{node.name}` of {path.name} (line "
                f"{node.lineno}); pass it to the class by hand"
            )
        elif _reads_free(node, ACCELERATOR) and not _binds(node, ACCELERATOR):
            raise ProgramError(
                f"the accelerator is needed at the top level of {path.name} (line "
                f"{node.lineno}); migrate this file by hand"
            )
    return names


def _reads_free(node: ast.AST, name: str) -> bool:
    """Whether code in `node` reads `name` where no enclosing function of `node` binds it."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    if isinstance(node, functions):
        arguments = node.args
        params = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        params += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
        if name in params or (not isinstance(node, ast.Lambda) and _assigns_locally(node, name)):
            return False
        stack = list(node.body) if isinstance(node.body, list) else [node.body]
    else:
        stack = [node]
    while stack:
        current = stack.pop()
        if current is not node and isinstance(current, functions):
            if _reads_free(current, name):
                return True
            continue
        if (
            isinstance(current, ast.Name)
            and current.id == name
            and isinstance(current.ctx, ast.Load)
        ):
            return True
        stack.extend(ast.iter_child_nodes(current))
    return False


def _assigns_locally(function: ast.AST, name: str) -> bool:
    for inner in ast.walk(function):
        if isinstance(inner, ast.Name) and inner.id == name and isinstance(inner.ctx, ast.Store):
            return True
    return False


def _binds(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(inner, ast.Name) and inner.id == name and isinstance(inner.ctx, ast.Store)
        for inner in ast.walk(node)
    )


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
                if node.name in own and not _has_param(node, ACCELERATOR):
                    inserts.append(_parameter_insert(text, node))
            elif _calls_one_of(node, names):
                inserts.append(_argument_insert(text, node))
            elif _named(node, names) and id(node) not in called:
                raise ProgramError(
                    f"`{dotted_name(node)}` needs the accelerator but is used as a value in "
                    f"{files[number].path.name} (line {node.lineno}), where no call can pass "
                    "it; migrate this program by hand"
                )
        result.append(_apply_inserts(text, inserts))
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
    for number, names in enumerate(program_names(modules, search_path(files[0].path))):
        for local, (owner, name) in names.items():
            if owner != number and name in needy.get(owner, set()):
                found.setdefault(number, set()).add(local)
    return found


def _has_param(node, name: str) -> bool:
    arguments = node.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return any(a.arg == name for a in every)


def _offset(text: str, line: int, col: int) -> int:
    """Character offset of an `ast` (line, UTF-8 byte column)."""
    lines = LINES.findall(text)  # as the tokenizer counts them (not str.splitlines: \x0c...)
    start = sum(len(item) for item in lines[: line - 1])
    return start + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))


def _parameter_insert(text: str, node) -> tuple[int, str]:
    """`def f(a, b)` -> `def f(a, b, *, accelerator)`; after `*args`/keyword-only parameters
    it joins them; before `**kwargs`."""
    arguments = node.args
    star = arguments.vararg is not None or arguments.kwonlyargs
    new = ACCELERATOR if star else f"*, {ACCELERATOR}"
    if arguments.kwarg is not None:
        at = _offset(text, arguments.kwarg.lineno, arguments.kwarg.col_offset)
        return text.rindex("**", 0, at), f"{new}, "
    parts = [
        *arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *arguments.defaults,
        *(d for d in arguments.kw_defaults if d is not None),
        *(a for a in (arguments.vararg,) if a is not None),
    ]  # fmt: skip
    return _after_last(text, parts, _closing_paren(text, node), new)


def _closing_paren(text: str, node) -> int:
    """Offset of the `)` that closes a def's parameter list."""
    first = node.body[0]
    body_at = _offset(text, first.lineno, first.col_offset)
    if node.returns is not None:
        body_at = _offset(text, node.returns.lineno, node.returns.col_offset)
    return _last_code_paren(text, body_at)


def _last_code_paren(text: str, before: int) -> int:
    """The last `)` before `before` that is not in a comment."""
    at = before
    while True:
        at = text.rindex(")", 0, at)
        line_start = text.rfind("\n", 0, at) + 1
        if "#" not in text[line_start:at]:
            return at


def _argument_insert(text: str, call: ast.Call) -> tuple[int, str]:
    close = _offset(text, call.end_lineno, call.end_col_offset) - 1  # the `)`
    parts = [*call.args, *call.keywords]
    return _after_last(text, parts, close, f"{ACCELERATOR}={ACCELERATOR}")


def _after_last(text: str, parts: list, close: int, new: str) -> tuple[int, str]:
    """Where `new` goes in a comma list: after the last item (and its comma, kept as the list's
    trailing comma), or alone before `close` in an empty list. Comments stay where they are."""
    if not parts:
        return close, new
    end = max(_offset(text, p.end_lineno, p.end_col_offset) for p in parts)
    rest = text[end:close]
    stripped = rest.lstrip(" \t")
    if stripped.startswith(","):
        return end + len(rest) - len(stripped) + 1, f" {new},"
    return end, f", {new}"


def _apply_inserts(text: str, inserts: list[tuple[int, str]]) -> str:
    for at, new in sorted(inserts, reverse=True):
        text = text[:at] + new + text[at:]
    return text
