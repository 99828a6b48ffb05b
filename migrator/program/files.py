"""A program's files as read: bytes, text, encoding and tree (`ProgramFile`), and the error a
program that cannot be joined raises."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from migrator.engine import decode, parse


@dataclass
class ProgramFile:
    path: Path
    data: bytes
    text: str
    encoding: str
    tree: ast.Module
    start_line: int = 0  # first line of this file in the joined module (1-based)
    lines: int = 0


class ProgramError(Exception):
    """A program that cannot be joined; the message is the cause."""


def read_file(path: Path) -> ProgramFile:
    data = path.read_bytes()
    text, encoding = decode(data)
    return ProgramFile(path, data, text, encoding, parse(text))
