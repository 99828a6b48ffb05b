"""Import-alias table: "is this really torch.optim.SGD?" answered from the module's own imports.

LibCST's QualifiedNameProvider answers the same question at ~8x the cost of a parse; a table
built from the import statements answers it at parse cost, which is what bulk runs need.
"""

from __future__ import annotations

import libcst as cst


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_name(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    return dotted_name(node) or ""


ImportEntry = tuple[str, "str | None", "str | None"]  # (module, name or None, asname or None)


def import_entries(small: cst.CSTNode) -> list[ImportEntry]:
    """The (module, name, asname) entries of one import statement, as RemoveImportsVisitor
    takes them: `import a.b as c` -> ("a.b", None, "c"); `from a import b` -> ("a", "b", None).
    Relative and star imports give none."""
    entries: list[ImportEntry] = []
    if isinstance(small, cst.Import):
        for alias in small.names:
            entries.append((dotted_name(alias.name) or "", None, _asname(alias)))
    elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None \
            and not isinstance(small.names, cst.ImportStar):  # fmt: skip
        module = _module_name(small.module)
        for alias in small.names:
            entries.append((module, dotted_name(alias.name) or "", _asname(alias)))
    return entries


def _asname(alias: cst.ImportAlias) -> str | None:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return None


class ImportTable:
    """Local name -> fully qualified name, from every import statement in the module."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.from_imports: set[tuple[str, str]] = set()  # (module, name) of `from m import n`
        self.relative: dict[str, str] = {}  # local name -> `.module.name` of relative imports

    def add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            asname = _asname(alias)
            if asname is not None:
                self.aliases[asname] = full
            else:  # `import torch.nn` binds `torch`
                head = full.split(".")[0]
                self.aliases[head] = head

    def add_import_from(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        module = _module_name(node.module)
        dots = "." * len(node.relative)
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            local = _asname(alias) or name
            full = f"{module}.{name}" if module else name
            if dots:  # kept apart: `qualify` never resolves through relative imports
                self.relative[local] = dots + full
                continue
            self.aliases[local] = full
            self.from_imports.add((module, name))

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of a Name/Attribute chain, resolving its head through imports.

        Names that were not imported come back as written (`Net`, `model.parameters`).
        """
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        resolved = self.aliases.get(head, head)
        return f"{resolved}.{rest}" if rest else resolved

    def imported(self, local: str) -> bool:
        return local in self.aliases
