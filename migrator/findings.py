"""Findings: what a rule recognised but could not (or should not) rewrite."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Finding:
    code: str
    message: str
    level: str = "warning"  # "warning": needs a human (exit 1); "note": explains a choice
    node: Any | None = None  # the CST node it is about; resolved to line/col by the engine
    line: int = 0
    col: int = 0
    # a note saying what a human must do by hand (MIG030's writer used beyond its methods):
    # true whether the migration is made or not, so kept when the file is left as it is
    by_hand: bool = False
    # MIG006's note on a definition that now prepares what its callers pass in: the name
    # callers call it by (`train`, the class of an `__init__`), checked against callers in
    # other files of the project (`program/callers.py`)
    prepares_for: str = ""
    # a refusal that a second try with every evaluation loader left plain (each noted) avoids
    # (MIG004: an evaluation helper handed prepared and plain loaders): the engine tries it
    plain_evaluation_helps: bool = False

    def __post_init__(self) -> None:
        # one line per finding (`path:line:col: CODE message`): source quoted in a message
        # (a multi-line f-string, CRLF) is joined on single spaces
        if "\n" in self.message or "\r" in self.message:
            self.message = " ".join(self.message.split())

    @property
    def needs_human(self) -> bool:
        """A warning (exit 1), not a note that only explains a choice."""
        return self.level == "warning"

    def render(self, path: str) -> str:
        marker = "" if self.needs_human else " (note)"
        return f"{path}:{self.line}:{self.col}: {self.code}{marker} {self.message}"

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "message": self.message,
            "level": self.level,
            "line": self.line,
            "col": self.col,
        }


# a file (program) left as it is, said once, at the finding that blocks its migration
LEFT_AS_IT_IS = "MIG950"


def abandoned(findings: list[Finding]) -> list[Finding]:
    """What a migration that is not made still says (SPEC §3b.8): its warnings, which say why
    and what a migration needs by hand. Its notes explained choices of the rewrite that is not
    written ("now prepares", "device = accelerator.device", "DataParallel removed") and go.
    Notes saying what to do by hand stay too. Findings of a file with no warning (nothing
    blocked it) are kept as they are."""
    if not any(f.needs_human for f in findings):
        return list(findings)
    return [f for f in findings if f.needs_human or f.by_hand]


def left_as_it_is(findings: list[Finding], what: str = "this file") -> list[Finding]:
    """`abandoned(findings)` and one note, at the first warning, saying that `what` is left as
    it is and that this finding blocks its migration (placed on the finding's own line, so it
    points at it in a notebook's cell as in a file)."""
    kept = abandoned(findings)
    blocking = sorted((f for f in kept if f.needs_human), key=lambda f: (f.line, f.col))
    if not blocking or any(f.code == LEFT_AS_IT_IS for f in kept):
        return kept
    first, more = blocking[0], len(blocking) - 1
    others = f" ({more} more finding{'s' if more > 1 else ''})" if more else ""
    note = Finding(
        code=LEFT_AS_IT_IS,
        level="note",
        message=f"{what} is left as it is: the {first.code} finding at this line blocks its "
        f"migration{others}",
    )
    note.line, note.col = first.line, first.col
    at = next(n for n, f in enumerate(kept) if f is first) + 1  # right after the finding
    return [*kept[:at], note, *kept[at:]]
