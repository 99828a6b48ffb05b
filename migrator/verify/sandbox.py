"""Each run's own working folder: a mirror of the user's current folder.

Scripts read data and write outputs relative to the folder they start in. Each run starts
in its own mirror of it: the same folders (real ones), each file a symbolic link to the
user's. Reading works as in the user's folder; a new file lands in the run's mirror, and a
file the run writes over is first made its own (the recorder's copy on write, `writes.py`).
So runs never write the user's files or each other's, and what each wrote can be compared.

Mirroring stops at MAX_ENTRIES: deeper folders (a data set of many files) are linked whole,
and a write into one of those reaches the user's folder, as it would without verify.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_ENTRIES = 5000
LINKED_WHOLE = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".tox"}


def mirror(source: Path, target: Path, max_entries: int = MAX_ENTRIES) -> None:
    """Fills `target` (created) with the mirror of `source`, breadth first; a folder whose
    entries no longer fit in what is left of `max_entries` is linked whole."""
    budget = max_entries
    # verify's own work folder may lie inside `source` (TMPDIR under the program's folder):
    # it is left out, or the mirror would copy itself
    own = os.path.abspath(target)
    queue = [(source, target)]
    while queue:
        folder, copy = queue.pop(0)
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            entries = None
        if copy != target and (entries is None or len(entries) > budget):
            _link(folder, copy)
            continue
        copy.mkdir(parents=copy == target, exist_ok=copy == target)
        budget -= len(entries or [])
        for entry in entries or []:
            destination = copy / entry.name
            if own == entry.path or own.startswith(entry.path.rstrip(os.sep) + os.sep):
                continue
            try:
                mirrored = entry.is_dir(follow_symlinks=False) and entry.name not in LINKED_WHOLE
            except OSError:
                continue
            if mirrored:
                queue.append((Path(entry.path), destination))
            else:
                _link(Path(entry.path), destination)


def _link(source: Path, destination: Path) -> None:
    try:
        destination.symlink_to(os.path.abspath(source))
    except OSError:
        pass
