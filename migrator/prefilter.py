"""Which files could need migration, decided as cheaply as possible, before the analysis.

Two stages, each a superset of what the full pipeline (engine.migrate_tree) changes or reports:

1. bytes: a file must contain one of the selected rules' declared `triggers` (derived from the
   rule classes, so a new rule cannot forget its own). A trigger that the analysis only ever
   meets as a method call (`x.backward(...)`) is refined by a linear-time regex: `.backward`
   then `(` (or `)` or a comment), with only whitespace or line continuations between, or
   `backward` first on a line; a dot on a line that starts with `#` or `>>>` (a comment, a
   doctest) does not count.
2. ast, once the file parsed (a file that cannot be parsed is reported): when `backward` is
   the only trigger, the bytes must also hold such a `.step(` (every rule it triggers acts
   only where an optimizer steps: a training loop, or MIG905's note); then, on the index the
   analysis will use (the file is indexed once; the gate is a few lookups), when the only
   triggers present are the method trigger and MIG910's `DataLoader`, the file must hold a
   real call `<expr>.backward(...)` and a real call `<expr>.step(...)`, or, for MIG910, call a
   loader class and a function imported from outside torch (its finding needs both).
   Whatever passes gets the full analysis, which is the only judge of what changes and what
   is reported.
"""

from __future__ import annotations

import ast
import re
from functools import cache

# Triggers the analysis only matches as a method name: `<expr>.NAME(...)`.
METHOD_TRIGGERS = frozenset({"backward"})
STEP = "step"  # what every method trigger needs beside it (an optimizer step)
# MIG910's trigger: the ast gate decides whether its finding is possible (`could_hide_step`).
HIDDEN_STEP_TRIGGER = "DataLoader"
LOADER_SUFFIX = "DataLoader"  # every loader class patterns knows ends so (tests/bulk check)


@cache
def triggers(rules: frozenset) -> tuple[bytes, ...]:
    from migrator.rule_table import rule_triggers  # the rules' own triggers, read statically

    found: list[bytes] = []
    for code, declared in rule_triggers().items():
        if code in rules:
            found.extend(t.encode() for t in declared if t.encode() not in found)
    return tuple(found)


@cache
def _method_pattern(name: str) -> re.Pattern[bytes]:
    word = re.escape(name.encode())
    space = rb"[ \t\f\r\n\\]*"  # whitespace, newlines (inside brackets), continuations
    # `.NAME` then `(` (a call), `)` (`(x.NAME)(...)`) or `#` (a comment before the `(`); or
    # NAME first on a line, whatever precedes it (a comment line after the dot, say).
    # No nested quantifiers: linear in the input, whatever the input.
    return re.compile(rb"(?:\.|[\r\n])" + space + word + space + rb"[()#]")


def matched_triggers(data: bytes, rules: frozenset) -> set[str] | None:
    """The triggers present in `data` (None when none is: no rule can apply)."""
    present = set()
    for trigger in triggers(rules):
        if trigger not in data:
            continue
        name = trigger.decode()
        if name in METHOD_TRIGGERS and not _method_call_in_code(data, name):
            continue
        present.add(name)
    return present or None


def _method_call_in_code(data: bytes, name: str) -> bool:
    """A `.NAME(` that could be code: a dot on a line that starts with `#` is in a comment (or
    a string), one on a line that starts with `>>>` is in a doctest (no code line can start
    with `>>>`); either way it is no attribute access. Anything else counts."""
    pattern = _method_pattern(name)
    match = pattern.search(data)
    while match is not None:
        start = match.start()
        if data[start : start + 1] != b".":
            return True  # NAME first on its line
        line_start = max(data.rfind(b"\n", 0, start), data.rfind(b"\r", 0, start)) + 1
        before = data[line_start:start].lstrip(b" \t\f")
        if not before.startswith((b"#", b">>>")):
            return True
        # Search again from the next byte, not the match's end: a skipped match may cover the
        # newline that starts a real `NAME` line.
        match = pattern.search(data, start + 1)
    return False


def could_need_migration(data: bytes, rules: frozenset) -> bool:
    """From the bytes alone: could any selected rule apply? (Never parses.)"""
    return matched_triggers(data, rules) is not None


def needs_syntax_gate(present: set[str]) -> bool:
    """The ast gate knows the method triggers' and MIG910's conditions; any other trigger
    skips it."""
    return present <= METHOD_TRIGGERS | {HIDDEN_STEP_TRIGGER}


def could_step(data: bytes, present) -> bool:
    """With the method trigger alone, the bytes must also hold a `.step(` call (every rule it
    triggers acts only where an optimizer steps: a training loop, or MIG905's note). Checked
    once the file parsed, so that syntax errors are still reported for every file with a
    backward call."""
    return not present <= METHOD_TRIGGERS or _method_call_in_code(data, STEP)


def gate(index, present: frozenset = METHOD_TRIGGERS) -> bool:
    """From the module's index: could the analysis change or report anything, given that only
    the triggers `present` (method triggers and MIG910's) were found in its bytes?"""
    calls = index.calls()
    if HIDDEN_STEP_TRIGGER in present and could_hide_step(index):
        return True  # MIG910 may report a training step in another module
    return any(site.method == "backward" for site in calls) and any(
        site.method == "step" for site in calls
    )


def could_hide_step(index) -> bool:
    """MIG910's precondition, loosened: a loader is built (a callee whose qualified name ends
    like every one of patterns.LOADER_CLASSES) and a function imported from a module other
    than torch (or from a relative import) is called."""
    imports = index.imports
    builds_loader = imported = False
    for site in index.calls():
        func = site.node.func
        qualified = imports.qualify(func)
        if qualified is None:
            continue
        builds_loader = builds_loader or qualified.endswith(LOADER_SUFFIX)
        while isinstance(func, ast.Attribute):
            func = func.value
        head = func.id if isinstance(func, ast.Name) else None
        imported = (
            imported
            or head in imports.relative
            or (head in imports.aliases and imports.aliases[head].split(".")[0] != "torch")
        )
        if builds_loader and imported:
            return True
    return False
