"""Import-alias table: "is this really torch.optim.SGD?" answered from the module's own imports.

A scope analysis (LibCST's QualifiedNameProvider) answers the same question at ~8x the cost of
a parse; a table built from the import statements answers it at parse cost, which is what bulk
runs need.
"""

from __future__ import annotations

import ast


def dotted_name(node: ast.expr | None) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    kind = node.__class__
    if kind is ast.Name:
        return node.id
    if kind is ast.Attribute and node.value.__class__ is ast.Name:
        return f"{node.value.id}.{node.attr}"
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif (
        isinstance(node, ast.Constant)
        and node.value in (True, False, None)
        and (node.value is None or isinstance(node.value, bool))
    ):
        parts.append(str(node.value))  # `None`, `True`: names to LibCST and to `qualify`
    else:
        return None
    return ".".join(reversed(parts))


ImportEntry = tuple[str, "str | None", "str | None"]  # (module, name or None, asname or None)


def import_entries(small: ast.stmt) -> list[ImportEntry]:
    """The (module, name, asname) entries of one import statement: `import a.b as c` ->
    ("a.b", None, "c"); `from a import b` -> ("a", "b", None). Relative and star imports give
    none."""
    if isinstance(small, ast.Import):
        return [(alias.name, None, alias.asname) for alias in small.names]
    if (
        isinstance(small, ast.ImportFrom)
        and not small.level
        and small.module is not None
        and small.names[0].name != "*"
    ):
        return [(small.module, alias.name, alias.asname) for alias in small.names]
    return []


class ImportTable:
    """Local name -> fully qualified name, from every import statement in the module."""

    def __init__(self) -> None:
        self._qualified: dict[int, str | None] | None = None  # once complete: id -> qualify
        self.aliases: dict[str, str] = {}
        self.from_imports: set[tuple[str, str]] = set()  # (module, name) of `from m import n`
        self.relative: dict[str, str] = {}  # local name -> `.module.name` of relative imports
        # project helpers this file calls that write, log, track or download where every
        # process runs them (migrator/program/helper_effects.py): qualified name -> Effect
        self.helper_effects: dict = {}
        # project helpers (functions, classes' methods) that draw from an RNG no seed makes
        # alike (migrator/program/helper_draws.py): qualified name -> Draws
        self.helper_draws: dict = {}
        # the helpers of the project modules it imports that make layers drawing at random
        # (dropout, random transforms: helper_draws.helper_random_layers): name -> True
        self.helper_random_layers: dict = {}

    def add_import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname is not None:
                self.aliases[alias.asname] = alias.name
            else:  # `import torch.nn` binds `torch`
                head = alias.name.split(".")[0]
                self.aliases[head] = head

    def add_import_from(self, node: ast.ImportFrom) -> None:
        if node.names[0].name == "*":
            return
        module = node.module or ""
        dots = "." * node.level
        for alias in node.names:
            name = alias.name
            local = alias.asname or name
            full = f"{module}.{name}" if module else name
            if dots:  # kept apart: `qualify` never resolves through relative imports
                self.relative[local] = dots + full
                continue
            self.aliases[local] = full
            self.from_imports.add((module, name))

    def qualify(self, node: ast.expr) -> str | None:
        """The qualified name of a Name/Attribute chain, resolving its head through imports.

        Names that were not imported come back as written (`Net`, `model.parameters`).
        """
        cache = self._qualified
        if cache is not None:
            found = cache.get(id(node), cache)
            if found is not cache:
                return found
        dotted = dotted_name(node)
        if dotted is None:
            result = None
        else:
            head, _, rest = dotted.partition(".")
            resolved = self.aliases.get(head, head)
            result = f"{resolved}.{rest}" if rest else resolved
        if cache is not None:
            cache[id(node)] = result
        return result

    def complete(self) -> None:
        """Every import is in: answers can be remembered (the nodes outlive the table)."""
        self._qualified = {}

    def imported(self, local: str) -> bool:
        return local in self.aliases
