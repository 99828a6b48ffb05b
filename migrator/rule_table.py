"""Each rule's code and byte triggers, read from the rule modules' source without importing them.

Importing the rules imports the whole analysis. A run whose files are all rejected by the
prefilter needs only the codes (for --select) and the triggers, so this reads them from the
class bodies in `migrator/rules/*.py` with `ast` (their attributes only, ~1 ms): a class with a
string `code = "MIG..."` is a rule; its `triggers` is its own tuple literal, else its base
class's.
Anything this reader does not understand makes it fall back to importing the rule classes, so
the table can never disagree with them (tests/bulk checks that both agree).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

RULES_DIR = Path(__file__).parent / "rules"


@cache
def rule_triggers() -> dict[str, tuple[str, ...]]:
    """{rule code: triggers}, in code order."""
    table = read_statically()
    if table is None:
        table = _imported()
    return dict(sorted(table.items()))


def rule_codes() -> tuple[str, ...]:
    return tuple(rule_triggers())


def read_statically(directory: Path = RULES_DIR) -> dict[str, tuple[str, ...]] | None:
    classes: dict[str, ast.ClassDef] = {}
    try:
        for path in sorted(directory.glob("*.py")):
            for head in class_heads(path.read_text(encoding="utf-8")):
                for node in ast.parse(head).body:
                    if isinstance(node, ast.ClassDef):
                        classes[node.name] = node
    except (OSError, SyntaxError, ValueError):
        return None
    table: dict[str, tuple[str, ...]] = {}
    for node in classes.values():
        code = _string_attribute(node, "code")
        if code is None or not code.startswith("MIG"):
            continue
        triggers = _triggers(node, classes, set())
        if triggers is None or code in table:
            return None
        table[code] = triggers
    return table or None


def class_heads(text: str) -> list[str]:
    """The module's top-level `class` statements, each cut before its first method: the class
    attributes are all the table needs, and parsing a few lines per rule instead of every
    rule module keeps this off the start-up of every run."""
    heads: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("class "):
            current = [line]
            heads.append(current)
        elif current is not None:
            stripped = line.lstrip()
            top_level = line[:1] not in ("", " ", "\t", ")", "]", "}")
            if top_level or (line != stripped and stripped.startswith(("def ", "async def ", "@"))):
                current = None
            else:
                current.append(line)
    return ["\n".join([*head, "    pass"]) + "\n" for head in heads]


def _triggers(node: ast.ClassDef, classes, seen: set[str]) -> tuple[str, ...] | None:
    for statement in node.body:
        target, value = _assignment(statement)
        if target == "triggers":
            try:
                triggers = ast.literal_eval(value)
            except ValueError:
                return None
            if isinstance(triggers, tuple) and all(isinstance(t, str) for t in triggers):
                return triggers
            return None
    if len(node.bases) != 1 or not isinstance(node.bases[0], ast.Name):
        return None
    base = classes.get(node.bases[0].id)
    if base is None or base.name in seen:
        return None
    return _triggers(base, classes, seen | {node.name})


def _string_attribute(node: ast.ClassDef, name: str) -> str | None:
    for statement in node.body:
        target, value = _assignment(statement)
        if target == name and isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
    return None


def _assignment(statement: ast.stmt):
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, ast.Name):
            return target.id, statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id, statement.value
    return None, None


def _imported() -> dict[str, tuple[str, ...]]:
    from migrator.rules import ALL_RULES

    return {rule.code: tuple(rule.triggers) for rule in ALL_RULES}
