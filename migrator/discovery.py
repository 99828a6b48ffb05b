"""Which files a run looks at: explicit files as given, directories walked for `*.py`, sorted.

Default excludes as black's; `.gitignore` and the exclude options come with the bulk issue.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_EXCLUDES = {
    ".git", ".hg", ".svn", ".venv", "venv", "build", "dist", "node_modules", "__pycache__",
    "site-packages", ".tox", ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache",
}  # fmt: skip


class DiscoveryError(Exception):
    pass


def discover(paths: list[str]) -> tuple[list[Path], list[tuple[str, str]]]:
    """(files in sorted order, [(path, problem)]) for the given command-line paths."""
    files: set[Path] = set()
    problems: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.update(_walk(path))
        elif path.is_file():
            files.add(path)
        elif path.exists():
            problems.append((raw, "not a regular file"))
        else:
            problems.append((raw, "no such file or directory"))
    return sorted(files), problems


def _walk(root: Path) -> list[Path]:
    found = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root).parts
        if any(part in DEFAULT_EXCLUDES for part in relative[:-1]):
            continue
        if path.is_file() and not path.is_symlink():
            found.append(path)
    return found
