"""Which files could need migration, decided as cheaply as possible, before LibCST sees them.

Two stages, each a superset of what the LibCST pipeline changes or reports:

1. bytes: a file must contain one of the selected rules' declared `triggers` (derived from the
   rule classes, so a new rule cannot forget its own). A trigger that the analysis only ever
   meets as a method call (`x.backward(...)`) is refined by a linear-time regex: `.backward`
   then `(` (or `)` or a comment), with only whitespace or line continuations between, or
   `backward` first on a line (after a comment line, say); a dot on a line that starts with
   `#` or `>>>` (a comment, a doctest) does not count.
2. ast (`ast.parse` is ~10x cheaper than LibCST): when the only triggers present are method
   triggers, the file must hold a real call `<expr>.backward(...)` and a real call
   `<expr>.step(...)`. Every rule of the analysis acts only where a loop trains (a backward
   and an optimizer step, migrator.analysis.loops), and its one note (MIG905) also needs an
   optimizer step in the backward's function: without both calls LibCST has provably nothing
   to change or report. Anything the gate cannot parse goes on to LibCST, which reports it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

# Triggers the analysis only matches as a method name: `<expr>.NAME(...)`.
METHOD_TRIGGERS = frozenset({"backward"})


@lru_cache(maxsize=None)
def triggers(rules: frozenset) -> tuple[bytes, ...]:
    from migrator.rule_table import rule_triggers  # the rules' own triggers, without LibCST

    found: list[bytes] = []
    for code, declared in rule_triggers().items():
        if code in rules:
            found.extend(t.encode() for t in declared if t.encode() not in found)
    return tuple(found)


@lru_cache(maxsize=None)
def _method_pattern(name: str) -> "re.Pattern[bytes]":
    word = re.escape(name.encode())
    space = rb"[ \t\f\r\n\\]*"  # whitespace, newlines (inside brackets), continuations
    # `.NAME` then `(` (a call), `)` (`(x.NAME)(...)`) or `#` (a comment before the `(`); or
    # NAME first on a line, whatever precedes it (a comment line after the dot, say).
    # No nested quantifiers: linear in the input, whatever the input.
    return re.compile(rb"(?:\.|[\r\n])" + space + word + space + rb"[()#]")


def matched_triggers(data: bytes, rules: frozenset) -> Optional[set[str]]:
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
    """The ast stage knows only the method triggers' conditions; any other trigger skips it."""
    return present <= METHOD_TRIGGERS


SKIP, LIBCST = "skip", "libcst"


@dataclass
class Screening:
    verdict: str  # SKIP: LibCST would change and report nothing; LIBCST: run it


def could_train_or_report(text: str) -> bool:
    """From `ast`: could the LibCST analysis find a training loop or report a backward call?"""
    return screen(text).verdict != SKIP


def screen(text: str) -> Screening:
    """The ast stage (see the module docstring); tests/bulk checks it against LibCST on every
    fixture and on torch's own sources."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Screening(LIBCST)  # LibCST decides (and reports the error if it cannot parse)
    facts = _CallFacts()
    facts.visit(tree)
    return Screening(LIBCST if facts.has_backward and facts.has_step else SKIP)


class _CallFacts(ast.NodeVisitor):
    """Whether the module calls `<expr>.backward(...)` and `<expr>.step(...)` anywhere."""

    def __init__(self) -> None:
        self.has_backward = False
        self.has_step = False

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute):
            if node.func.attr == "backward":
                self.has_backward = True
            elif node.func.attr == "step":
                self.has_step = True
        self.generic_visit(node)
