"""The program's modules that are imported but not joined (models, utilities without a
training step: `utils.save_model`, `models.tester.test_model`), read so that the analysis can
see what a helper of theirs does with what the training code hands it.

A program (program/unit.py) fills it from the project modules its entry reaches; a single
file migrated alone has an empty one, and its imported helpers are read by their names
(hand_offs.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.syntax.imports import ImportTable


@dataclass(eq=False)
class HelperModule:
    name: str  # as the program imports it: `utils`, `models.tester`, `.utils`
    tree: ast.Module
    imports: ImportTable
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]


@dataclass(eq=False)
class HelperLibrary:
    modules: dict[str, HelperModule] = field(default_factory=dict)

    def add(self, name: str, tree: ast.Module) -> None:
        if name in self.modules:
            return
        imports = ImportTable()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imports.add_import(node)
            elif isinstance(node, ast.ImportFrom):
                imports.add_import_from(node)
        functions = {
            node.name: node
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.modules[name] = HelperModule(name, tree, imports, functions)

    def function(self, qualified: str | None):
        """(the module, the `def`) of `pkg.module.function` (`.module.function` imported
        relatively), or None."""
        if not qualified or "." not in qualified.lstrip("."):
            return None
        module, _, name = qualified.rpartition(".")
        found = self.modules.get(module)
        if found is None or name not in found.functions:
            return None
        return found, found.functions[name]

    def called(self, call: ast.Call, imports: ImportTable, foreign: str | None):
        """`function(...)` for the call: by its qualified name, or `foreign` (relative)."""
        return self.function(imports.qualify(call.func)) or self.function(foreign)
