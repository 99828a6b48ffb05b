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
