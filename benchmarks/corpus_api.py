"""The Accelerate API real Accelerate code uses, against our runtime's: the public names a file
reads from its `accelerator`, and the names our `runtime.Accelerator` has (read from its
source, so no torch import). corpus.py reports the coverage for its `accelerate` set.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

RUNTIME_SOURCE = Path(__file__).resolve().parent.parent / "runtime" / "accelerator.py"


def accelerator_attributes(data: bytes) -> list[str]:
    """Public attribute names read from `accelerator` or `<x>.accelerator` in a file."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return []
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr.startswith("_"):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id == "accelerator") or (
            isinstance(owner, ast.Attribute)
            and owner.attr == "accelerator"
            and not (isinstance(owner.value, ast.Name) and owner.value.id == "torch")
        ):
            names.add(node.attr)
    return sorted(names)


def runtime_api(source: Path = RUNTIME_SOURCE, class_name: str = "Accelerator") -> set[str]:
    """Names an instance of our runtime's Accelerator has: methods, properties, class-level
    assignments and `self.<name> = ...` in its methods, and the same of its base classes
    imported from runtime modules (read from the source: no torch import)."""
    tree = ast.parse(source.read_text())
    imported = {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("runtime.")
        for alias in node.names
    }
    names: set[str] = set()
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in imported:
                module = imported[base.id].split(".", 1)[1]
                names |= runtime_api(source.parent / f"{module}.py", base.id)
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(item.name)
            elif isinstance(item, ast.Assign):
                names.update(t.id for t in item.targets if isinstance(t, ast.Name))
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.ctx, ast.Store)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
            ):
                names.add(sub.attr)
    return {name for name in names if not name.startswith("_")}


def print_api_coverage(results) -> None:
    """The API the `accelerate` set's files read from their accelerator, against ours."""
    supported = runtime_api()
    used = Counter(name for r in results for name in r.accelerator_names)
    missing = {name: n for name, n in used.items() if name not in supported}
    files = sum(1 for r in results if r.accelerator_names)
    covered = sum(
        1 for r in results if r.accelerator_names and not set(r.accelerator_names) - supported
    )
    print(
        f"\naccelerate: accelerator.<name> API: {len(used)} names used in {files} files; "
        f"{len(used) - len(missing)} supported by runtime.Accelerator; "
        f"{covered} files use only supported names"
    )
    if missing:
        ranked = sorted(missing.items(), key=lambda item: (-item[1], item[0]))
        print("  unsupported (files): " + ", ".join(f"{name} ({n})" for name, n in ranked))
