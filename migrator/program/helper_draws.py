"""Random draws of project helpers a file calls but the migration does not edit.

A training file draws its batches, its noise or its validation sample through a helper of
its project: `reader.data_gen(batch_size, "valid")` of a class in `data_reader.py` whose
generator picks rows with `np.random.permutation`, a `sample_batch(buffer)` function with
`random.sample`. Where no seed makes that RNG alike on every process, each process draws its
own numbers once launched on N processes, and so computes its own losses and metrics from
them: a decision taken on them differs per process (an early stop that some processes take
and others do not hangs the run). The value flow (analysis/effects/value_expressions.py)
reads a call of such a helper as this process's own value.

This reads each imported project module (once per version of its file) and returns, under
the names the importing file calls them by:
- each top-level function whose body, or a function of the same module it calls, draws;
- each top-level class with the methods that draw, directly, through `self.other()` or
  through a drawing function of the module (all of them, "*", where its constructor draws:
  what it keeps differs per process).
A module that seeds that RNG itself with one value (`np.random.seed(0)`) draws alike.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from migrator.analysis.catalogue.randomness import (
    ALL_RNGS,
    EVERY_METHOD,
    PER_PROCESS,
    Draws,
    is_draw,
    is_seed,
    random_layer,
    rng_of,
    unseeded_split,
)
from migrator.analysis.syntax.imports import ImportTable
from migrator.program.helper_effects import helper_effects


def helper_draws(
    tree: ast.Module, path: Path, skipped: set[Path] = frozenset(), roots=None, read=None
) -> dict[str, Draws]:
    """{the name `tree` calls a helper function or class by: its Draws} (module docstring),
    for the project modules `tree` (the file at `path`) imports, as helper_effects reads
    them."""
    return helper_effects(tree, path, skipped, roots, read, summary=_module_draws)


def helper_random_layers(
    tree: ast.Module, path: Path, skipped: set[Path] = frozenset(), roots=None
) -> dict[str, bool]:
    """{the name `tree` calls a helper function or class by: True} for those of the project
    modules it imports that make layers drawing at random while training (dropout,
    torchvision's random transforms: `dataset.py`'s `RandomResizedCrop` an augmenting data set
    applies), in their body or in their module's code (a module-level `transform = ...` any
    of them may use): MIG009 seeds such a program apart per process."""
    return helper_effects(tree, path, skipped, roots, None, summary=_module_layers)


def _module_layers(path: Path) -> dict[str, bool]:
    return _summary(path, _layers)


def _module_draws(path: Path) -> dict[str, Draws]:
    return _summary(path, _draws)


def _summary(path: Path, read) -> dict:
    """`read(tree, imports)` of the module at `path`, once per version of its file; {} where
    it cannot be read."""
    try:
        stat = path.stat()
    except OSError:
        return {}
    return _read(path, stat.st_mtime_ns, stat.st_size, read)


@lru_cache(maxsize=512)
def _read(path: Path, _mtime: int, _size: int, read) -> dict:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return {}
    return read(tree, _imports_of(tree))


def _layers(tree: ast.Module, imports: ImportTable) -> dict[str, bool]:

    def random(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.Call) and random_layer(n, imports.qualify(n.func) or "")
            for n in ast.walk(node)
        )

    defined = [
        n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    module_code = [n for n in tree.body if n not in defined]
    everywhere = any(random(n) for n in module_code)
    return {n.name: True for n in defined if everywhere or random(n)}


def _imports_of(tree: ast.Module) -> ImportTable:
    imports = ImportTable()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.add_import(node)
        elif isinstance(node, ast.ImportFrom):
            imports.add_import_from(node)
    return imports


def _draws(tree: ast.Module, imports: ImportTable) -> dict[str, Draws]:
    seeded = _seeded(tree, imports)
    functions = {
        n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    drawing = _fixed_point(functions, lambda call: _called_name(call, functions), imports, seeded)
    found: dict[str, Draws] = {name: Draws(draw) for name, draw in drawing.items()}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods = {
                m.name: m
                for m in node.body
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
            }

            def inner(call, methods=methods):
                func = call.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (
                    func.value.id == "self" and func.attr in methods
                ):  # fmt: skip
                    return func.attr
                return None

            own = _fixed_point(methods, inner, imports, seeded, drawing)
            if own:
                names = frozenset({EVERY_METHOD} if "__init__" in own else own)
                found[node.name] = Draws(next(iter(own.values())), names)
    return found


def _fixed_point(functions: dict, inner, imports: ImportTable, seeded: set[str], outer=None):
    """{name of a function in `functions`: the first draw its body makes}, through the calls
    `inner(call)` names (functions of the same set) and the module's drawing functions
    (`outer`)."""
    outer = outer or {}
    drawing: dict[str, str] = {}
    calls: dict[str, list[str]] = {}
    for name, function in functions.items():
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            qualified = imports.qualify(node.func) or ""
            split = unseeded_split(node, qualified)  # `random_split(ds, [n, m])`
            rng = split or (rng_of(qualified) if is_draw(qualified) else None)
            if rng is not None and not ({rng, ALL_RNGS} & seeded):
                drawing.setdefault(name, qualified)
            elif isinstance(node.func, ast.Name) and node.func.id in outer:
                drawing.setdefault(name, outer[node.func.id])
            called = inner(node)
            if called is not None:
                calls.setdefault(name, []).append(called)
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            for callee in called:
                if callee in drawing and name not in drawing:
                    drawing[name] = drawing[callee]
                    changed = True
    return drawing


def _called_name(call: ast.Call, functions: dict) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) and call.func.id in functions else None


def _seeded(tree: ast.Module, imports: ImportTable) -> set[str]:
    """The RNGs the module seeds itself with one value on every process."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            qualified = imports.qualify(node.func) or ""
            apart = any(word in ast.unparse(a) for a in node.args for word in PER_PROCESS)
            if is_seed(qualified) and not apart:
                found.add(rng_of(qualified))
    return found
