"""Side effects of project helpers a file calls but the migration does not edit.

A training file (or program) calls helpers of its project that are not part of what is
migrated: `utils.save_model(model, tokenizer, out_dir)`, `save_checkpoint(state, is_best)`,
`dataset.get_dataset(root)` with `download=True` inside. Their writes run on every process
once the program is launched on N processes (SPEC §3b.2), though the file being migrated
shows none. This reads each imported project module (once per run), finds its top-level
functions (and its classes' methods, `Class.method`) whose body - or a function of the same
module they call, or a method they call on `self` - writes a file, starts a tracker or
downloads (the effects catalogue, `analysis/catalogue/effects.py`) outside a
main-process guard of its own, and returns them under the names the importing file calls
them by. `effects.effect_of` then treats such a call as the effect itself: MIG030 guards it
(`if accelerator.is_main_process:`, `main_process_first()` for a download) and the
soundness check refuses a program that leaves one unguarded.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from migrator.analysis.catalogue import effects
from migrator.analysis.effects.processes import Processes
from migrator.analysis.syntax.index import ModuleIndex
from migrator.program.imports import module_file, search_path
from migrator.source import Source

ORDER = ("write", "log", "tracker", "download")  # what the helper is named for, first found


def helper_effects(
    tree: ast.Module,
    path: Path,
    skipped: set[Path] = frozenset(),
    roots=None,
    read=None,
    summary=None,
) -> dict[str, effects.Effect]:
    """{the name `tree` calls a helper by (as `ImportTable.qualify` spells it): its effect},
    for the project modules `tree` (the file at `path`) imports, except those in `skipped`
    (resolved paths: the program's own members, which are migrated and read whole). `read`, a
    set, gets every module read: the file's verdict depends on them (the cache's key).
    `summary(module file)` gives {name: what it does} (its effects by default; helper_draws.py
    gives the random draws)."""
    summary = summary or _module_effects
    roots = roots if roots is not None else search_path(path, tree)
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    found: dict[str, effects.Effect] = {}
    for node in ast.walk(tree):
        for spelling, target in _imported_modules(node, path, roots):
            if target in skipped:
                continue
            if read is not None:
                read.add(target)
            for name, effect in summary(target).items():
                if not spelling and (name.startswith("_") or name.split(".")[0] in defined):
                    continue  # `import *` skips private names; a file's own definition wins
                found.setdefault(f"{spelling}.{name}" if spelling else name, effect)
        for local, target, name in _imported_functions(node, path, roots):
            if read is not None and target not in skipped:
                read.add(target)
            found_here = summary(target) if target not in skipped else {}
            effect = found_here.get(name)
            if effect is not None and local not in defined:
                found.setdefault(local, effect)
            for member, effect in found_here.items():  # a class's methods: `Class.method`
                if member.startswith(f"{name}.") and local not in defined:
                    found.setdefault(f"{local}{member[len(name) :]}", effect)
    return found


def _imported_modules(node: ast.AST, path: Path, roots: list[Path]):
    """(prefix the module's functions are called under, the module's file): `import a.b as u`
    -> ("a.b", a/b.py), qualify(u.f) being "a.b.f"; `from pkg import mod` -> ("pkg.mod", ...);
    `from . import mod as m` -> ("m", ...): relative names are not resolved by `qualify`;
    `from m import *` -> ("", m.py): the functions come under their own names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _find(roots, alias.name)
            if target is not None:
                yield alias.name, target
    elif isinstance(node, ast.ImportFrom):
        folders, dotted = _from_folders(node, path, roots)
        for alias in node.names:
            if alias.name == "*":
                target = _find(folders, dotted)
                if target is not None:
                    yield "", target
                continue
            sub = _find(folders, f"{dotted}.{alias.name}" if dotted else alias.name)
            if sub is not None:
                absolute = node.level == 0 and node.module
                yield (
                    (f"{node.module}.{alias.name}" if absolute else alias.asname or alias.name),
                    sub,
                )


def _imported_functions(node: ast.AST, path: Path, roots: list[Path]):
    """(the name a function is called by, its module's file, its own name) for `from m import
    f as g`: "m.f" when absolute (qualify resolves it), "g" when relative."""
    if not isinstance(node, ast.ImportFrom):
        return
    folders, dotted = _from_folders(node, path, roots)
    target = _find(folders, dotted)
    if target is None:
        return
    for alias in node.names:
        if alias.name != "*":
            local = f"{node.module}.{alias.name}" if node.level == 0 else alias.asname or alias.name
            yield local, target, alias.name


def _from_folders(node: ast.ImportFrom, path: Path, roots: list[Path]):
    if not node.level:
        return roots, node.module or ""
    package = path.resolve().parent
    for _ in range(node.level - 1):
        package = package.parent
    return [package], node.module or ""


def _find(folders: list[Path], dotted: str) -> Path | None:
    for folder in folders:
        found = module_file(folder, dotted) if dotted else _init(folder)
        if found is not None:
            return found
    return None


def _init(folder: Path) -> Path | None:
    init = folder / "__init__.py"
    return init.resolve() if init.is_file() else None


def _module_effects(path: Path) -> dict[str, effects.Effect]:
    """{top-level function of the module, or `Class.method` of a top-level class: its first
    unguarded effect}, through the module's own functions it calls and the methods a method
    calls on `self` (to a fixed point); read once per version of the file."""
    try:
        stat = path.stat()
    except OSError:
        return {}
    return _read_effects(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _read_effects(path: Path, _mtime: int, _size: int) -> dict[str, effects.Effect]:
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return {}
    index = ModuleIndex(tree, Source(text))
    processes = Processes(index)
    functions = _functions(index, tree)
    own: dict[str, effects.Effect] = {}
    calls: dict[str, list[tuple[str, object]]] = {}
    for name, scope in functions.items():
        cls = name.rpartition(".")[0]
        for site in _sites(index, scope):
            if processes.guarded(site.statement):
                continue
            effect = effects.effect_of(site.node, index.imports, effects.values_in(site.scope))
            if effect is not None and _before(effect, own.get(name)):
                own[name] = effect
            callee = site.node.func
            if isinstance(callee, ast.Name) and callee.id in functions:
                calls.setdefault(name, []).append((callee.id, site.node))
            elif (
                cls
                and isinstance(callee, ast.Attribute)
                and _is_self(callee.value)
                and (f"{cls}.{callee.attr}" in functions)
            ):  # `self._save()` in a method
                calls.setdefault(name, []).append((f"{cls}.{callee.attr}", site.node))
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            for callee, node in called:
                effect = own.get(callee)
                if effect is not None and _before(effect, own.get(name)):
                    own[name] = effects.Effect(effect.kind, effect.what, node)
                    changed = True
    return own


def _functions(index: ModuleIndex, tree: ast.Module) -> dict:
    """The module's top-level functions by name, and its top-level classes' methods as
    `Class.method`."""
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    found = {}
    for scope in index.scopes:
        if not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if scope.node in tree.body:
            found[scope.node.name] = scope
        elif scope.parent is not None and scope.parent.kind == "class" and (
            scope.parent.parent is index.module_scope and scope.parent.name in classes
        ):  # fmt: skip
            found[f"{scope.parent.name}.{scope.node.name}"] = scope
    return found


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _sites(index: ModuleIndex, function):
    """The calls in `function`, its nested functions included."""
    inside = {id(n) for n in ast.walk(function.node)}
    return [site for site in index.calls() if id(site.node) in inside]


def _before(effect: effects.Effect, current: effects.Effect | None) -> bool:
    return current is None or ORDER.index(effect.kind) < ORDER.index(current.kind)
