"""A program spread over modules, migrated as one unit.

Research code keeps the objects in `main.py` and the training step in a helper module
(`engine.train_one_epoch(model, criterion, data_loader, optimizer, device, epoch)`, a Trainer
class in `train_util.py`). A file of such a program is never migrated alone: a prepare in the
entry without `accelerator.backward` in the helper, or the other way round, is half a migration.

How: the entry and the project modules it imports that hold a backward (found by
`analysis/program_imports.py`, transitively) are joined into one module, entry first, each
file ending with a marker statement of its own. The analysis and the rules see one module, so
roles flow from `main()` into `train_one_epoch` through its call site exactly as between two
functions of one file, and every edit is made where its object lives. The edited text is cut
back into files at the markers; then, per file, the imports (`from runtime import Accelerator`,
`import torch`, imports the edits retired) and the accelerator's reach.

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
Where the accelerator would have to reach a method or module-level code of a helper, the
program is refused with a finding naming the place.

Findings are reported in the file and at the line they belong to. A program whose files
cannot be joined safely (two files binding the same top-level name differently) is refused.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from migrator.analysis.program_imports import local_imports, search_path
from migrator.engine import (
    FileResult,
    MigrationError,
    Options,
    check_parses,
    decode,
    encode,
    parse,
    render_migration,
)
from migrator.findings import Finding
from migrator.source import Source

MARKER = "__migrator_program_file__ = {}"
MAX_FILES = 32  # a program joins at most this many files (the entry and its training helpers)
STEP_CALLS = frozenset({"backward", "zero_grad", "init_process_group"})
MAX_SCANNED = 400  # project modules read to find them
ACCELERATOR = "accelerator"
CODE = "MIG910"
LINES = re.compile(
    r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$"
)  # a program that cannot be migrated as a unit is a hidden step still


@dataclass
class ProgramFile:
    path: Path
    data: bytes
    text: str
    encoding: str
    tree: ast.Module
    start_line: int = 0  # first line of this file in the joined module (1-based)
    lines: int = 0


@dataclass
class ProgramResult:
    entry: Path
    files: list[ProgramFile] = field(default_factory=list)
    results: list[FileResult] = field(default_factory=list)  # one per file, entry first

    @property
    def paths(self) -> list[Path]:
        return [f.path for f in self.files]


class ProgramError(Exception):
    """A program that cannot be joined; the message is the cause."""


def read_file(path: Path) -> ProgramFile:
    data = path.read_bytes()
    text, encoding = decode(data)
    return ProgramFile(path, data, text, encoding, parse(text))


def members(entry: Path, first: ProgramFile | None = None) -> list[ProgramFile]:
    """The entry and the project modules it imports (transitively) that hold a step call
    (`_steps`: the helpers where the training step lives), with the modules on the import chain between
    them (`loop.fit` passing the objects to `steps.training_step`): entry first, then in
    import order. Files that cannot be read or parsed are left out (reported on their own)."""
    roots = search_path(entry)
    start = first or read_file(entry)
    parsed = {start.path.resolve(): start}
    parent: dict[Path, Path | None] = {start.path.resolve(): None}
    order = [start.path.resolve()]
    queue = [start]
    while queue and len(parsed) < MAX_SCANNED:
        current = queue.pop(0)
        for imported in local_imports(current.tree, current.path, roots):
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
    selected = [parsed[path] for path in order if path in chosen]
    return selected[:MAX_FILES]


def _steps(tree: ast.Module) -> bool:
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


def migrate_program(entry: Path, options: Options, first: ProgramFile | None = None):
    """The program of `entry` migrated as one unit, or None when the entry imports no project
    module with a training step (a single file: the engine's business)."""
    files = members(entry, first)
    if len(files) < 2:
        return None
    program = ProgramResult(entry, files)
    try:
        _check_joinable(files)
        joined = _join(files)
        output, context, findings = render_migration(joined, parse(joined), options)
    except ProgramError as error:
        program.results = _unchanged(files, [[_finding(files[0], 1, str(error))]])
        return program
    except MigrationError as error:
        program.results = _unchanged(files, [[_finding(files[0], 1, f"joined program: {error}")]])
        return program
    per_file = _assign(files, _in_program(findings, files))
    if output is None:
        program.results = _unchanged(files, per_file)
        return program
    texts = _split(output, files)
    try:
        texts = _reach_accelerator(texts, files)
        _check_reach(texts, files)
    except ProgramError as error:
        per_file[0].append(_finding(files[0], 1, str(error)))
        program.results = _unchanged(files, per_file)
        return program
    program.results = [
        _finish(file, text, context, found) for file, text, found in zip(files, texts, per_file)
    ]
    return program


def _finish(file: ProgramFile, text: str, context, findings: list[Finding]) -> FileResult:
    from migrator.engine import _edit_imports

    result = FileResult(path=str(file.path), source=file.data, findings=findings)
    if text == file.text:
        return result
    text = _drop_misplaced_import(text, file.text, context)
    text = _add_missing_imports(text, context)
    text, tree = _edit_imports(text, _PerFile(context))
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


def _drop_misplaced_import(text: str, original: str, context) -> str:
    """MIG001 puts `from runtime import Accelerator` after the joined module's first imports,
    which are a helper's: gone from a file that does not read `Accelerator` (and did not have
    the line before); `_add_missing_imports` puts it where it is read."""
    source = "accelerate" if context.target == "accelerate" else "runtime"
    line = f"from {source} import Accelerator"
    lines = text.splitlines(keepends=True)
    if line not in (item.rstrip("\r\n") for item in original.splitlines()):
        kept = [item for item in lines if item.rstrip("\r\n") != line]
        if len(kept) != len(lines) and "Accelerator" not in _module_names(parse(text))[1]:
            return "".join(kept)
    return text


def _add_missing_imports(text: str, context) -> str:
    """`from runtime import Accelerator` and the modules rules asked for (`import torch`) in
    the file that reads them without having them."""
    from migrator.import_edits import add_module_imports

    tree = parse(text)
    bound, read = _module_names(tree)
    source = "accelerate" if context.target == "accelerate" else "runtime"
    if "Accelerator" in read and "Accelerator" not in bound:
        text = _insert_import(text, tree, f"from {source} import Accelerator")
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


def _check_joinable(files: list[ProgramFile]) -> None:
    """Two files that bind one top-level name to different things would share it in the
    joined module (a `def main` in each, `utils` imported as two modules), and new code is
    written in the joined module's line ending: refused."""
    endings = {Source(file.text).newline for file in files if "\n" in file.text}
    if len(endings) > 1:
        raise ProgramError(
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
                raise ProgramError(
                    f"`{name}` is defined both in {previous[0].name} and in {file.path.name}: "
                    "the program cannot be migrated as one unit; migrate its files by hand"
                )
            owners[name] = (file.path, meaning)


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
                found[local] = f"import {alias.name if alias.asname else local}"
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:  # `from timm.data import Mixup` == `from timm.data.mixup ...`
                found[alias.asname or alias.name] = f"import {alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = f"def {id(node)}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            # the same statement in two files (`logger = logging.getLogger(__name__)`) is one
            # meaning for the analysis; dunders (`__all__`, `__version__`) are never read by it
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and not name.id.startswith("__"):
                        found[name.id] = f"= {ast.dump(node)}"
    return found


# -- the accelerator in helper modules ---------------------------------------------------


def _reach_accelerator(texts: list[str], files: list[ProgramFile]) -> list[str]:
    """Each helper function that reads the free name `accelerator` gets it as a keyword-only
    parameter, and every call of it in the program passes `accelerator=accelerator` (to a
    fixed point: a helper calling such a function now reads it too)."""
    needy: dict[int, set[str]] = {}
    for _ in range(len(files) * 8):
        changed = False
        for number in range(1, len(files)):
            tree = parse(texts[number])
            for name in _functions_reading_accelerator(tree, files[number].path):
                if name not in needy.setdefault(number, set()):
                    needy[number].add(name)
                    changed = True
        texts = _pass_accelerator(texts, files, needy)
        if not changed:
            return texts
    return texts


def _check_reach(texts: list[str], files: list[ProgramFile]) -> None:
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
    """Whether top-level code (not a def's or class's body) assigns `name`."""
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
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in tree.body:
                if node.name in own and not _has_param(node, ACCELERATOR):
                    inserts.append(_parameter_insert(text, node))
            elif _calls_one_of(node, names):
                inserts.append(_argument_insert(text, node))
        result.append(_apply_inserts(text, inserts))
    return result


def _calls_one_of(node: ast.AST, names: set[str]) -> bool:
    """A call `f(...)` of one of `names` that does not pass the accelerator yet."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in names
        and not any(k.arg == ACCELERATOR for k in node.keywords)
    )


def _imported_names(files: list[ProgramFile], needy: dict[int, set[str]]) -> dict[int, set[str]]:
    """Per file, the local names under which it imports a needy function of another file."""
    roots = search_path(files[0].path)
    by_path = {file.path.resolve(): number for number, file in enumerate(files)}
    found: dict[int, set[str]] = {}
    for number, file in enumerate(files):
        for node in ast.walk(file.tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            targets = local_imports(ast.Module(body=[node], type_ignores=[]), file.path, roots)
            for target in targets:
                owner = by_path.get(target.path)
                if owner is None or not target.names:
                    continue
                for alias in node.names:
                    if alias.name in needy.get(owner, set()):
                        found.setdefault(number, set()).add(alias.asname or alias.name)
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


# -- findings -----------------------------------------------------------------------------


def _finding(file: ProgramFile, line: int, message: str) -> Finding:
    finding = Finding(code=CODE, message=message)
    finding.line, finding.col = line, 1
    return finding


def _in_program(findings: list[Finding], files: list[ProgramFile]) -> list[Finding]:
    """MIG910 says a step hides in another module; analysed with it, say so."""
    names = ", ".join(file.path.name for file in files[1:])
    for finding in findings:
        if finding.code == CODE and "migrate both files by hand" in finding.message:
            finding.message = finding.message.replace(
                "migrate both files by hand",
                f"analysed as one program with {names}, where no training loop was recognised; "
                "migrate these files by hand",
            )
    return findings


def _assign(files: list[ProgramFile], findings: list[Finding]) -> list[list[Finding]]:
    """Each finding moved to its file, its line counted in that file."""
    per_file: list[list[Finding]] = [[] for _ in files]
    for finding in findings:
        owner = 0
        for number, file in enumerate(files):
            if file.start_line <= finding.line < file.start_line + file.lines + 1:
                owner = number
        if finding.line:
            finding.line -= files[owner].start_line - 1
        per_file[owner].append(finding)
    return per_file


def _unchanged(files: list[ProgramFile], findings: list[list[Finding]]) -> list[FileResult]:
    results = []
    for number, file in enumerate(files):
        found = findings[number] if number < len(findings) else []
        results.append(FileResult(path=str(file.path), source=file.data, findings=found))
    return results
