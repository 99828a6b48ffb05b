"""Which files a run looks at (SPEC §2), in sorted order.

- Directories are walked recursively for `*.py` and `*.ipynb`; symlinks (to files or
  directories) are never followed, so a walk cannot leave the tree or loop.
- `.gitignore` files are honoured as git does: each applies below its own directory, nested
  ones included, up from the walk root to the repository root (the directory holding `.git`).
  A directory named on the command line is walked even if an ignore file above it ignores it.
- Default excludes (`.git`, `.venv`, `build`, `.migrate_cache`, `.ipynb_checkpoints`...) are
  replaced by `exclude` and extended by `extend-exclude`: gitignore-style globs, relative to
  the project root (where the pyproject.toml with `[tool.migrate]` is, else the current
  directory).
- Files named on the command line are processed as given, unless `force_exclude` is set: then
  excludes and ignore files apply to them too (what pre-commit hooks want).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", "build", "dist", "node_modules", "__pycache__",
    "site-packages", ".tox", ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".migrate_cache", ".ipynb_checkpoints",
)  # fmt: skip
NOTEBOOK_SUFFIX = ".ipynb"
SOURCE_SUFFIXES = (".py", NOTEBOOK_SUFFIX)


@dataclass
class DiscoverySettings:
    exclude: list[str] | None = None  # None: the default excludes
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool = False
    root: Path | None = None  # what exclude globs are relative to (default: cwd)

    def exclude_spec(self) -> GitIgnoreSpec:
        from pathspec import GitIgnoreSpec  # not for a run on named files (pre-commit's)

        names = [f"{name}/" for name in DEFAULT_EXCLUDES] if self.exclude is None else self.exclude
        return GitIgnoreSpec.from_lines([*names, *self.extend_exclude])


@dataclass
class Discovery:
    files: list[Path]
    problems: list[tuple[str, str]]  # (path, cause): errors


def discover(paths: Iterable[str], settings: DiscoverySettings | None = None) -> Discovery:
    settings = settings or DiscoverySettings()
    walker = _Walker(settings)
    found: dict[str, Path] = {}
    problems: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        try:
            path.stat()
        except OSError as error:
            cause = (
                "symlink loop"
                if error.errno == errno.ELOOP
                else ("no such file or directory" if not path.is_symlink() else "broken symlink")
            )
            if error.errno not in (errno.ENOENT, errno.ELOOP):
                cause = error.strerror or str(error)
            problems.append((raw, cause))
            continue
        if path.is_dir():
            for file in walker.walk(path):
                found.setdefault(os.path.normpath(file), file)
            continue
        if not path.is_file():
            problems.append((raw, "not a regular file"))
            continue
        if settings.force_exclude and walker.excluded_explicit(path):
            continue
        found.setdefault(os.path.normpath(path), path)
    return Discovery(sorted(found.values()), problems)


class _Walker:
    def __init__(self, settings: DiscoverySettings) -> None:
        self.settings = settings
        self.root = (settings.root or Path.cwd()).absolute()
        self._ignore_files: dict[Path, GitIgnoreSpec | None] = {}
        if settings.exclude is not None or settings.extend_exclude:
            self.excludes  # noqa: B018 - the user's globs are compiled (and fail) up front

    @cached_property
    def excludes(self) -> GitIgnoreSpec:
        return self.settings.exclude_spec()

    # -- command-line files ------------------------------------------------------------------
    def excluded_explicit(self, path: Path) -> bool:
        absolute = Path(os.path.abspath(path))
        parts = self._relative_parts(absolute, self.root) or absolute.parts[1:]
        for depth in range(1, len(parts) + 1):
            rel = "/".join(parts[:depth]) + ("/" if depth < len(parts) else "")
            if self.excludes.match_file(rel):
                return True
        return _ignored(absolute, False, self._ignores_above(absolute))

    # -- directories -------------------------------------------------------------------------
    def walk(self, top: Path) -> list[Path]:
        absolute_top = Path(os.path.abspath(top))
        inherited = self._ancestor_ignores(absolute_top)
        # Excludes apply below a directory named on the command line, never to it or its
        # ancestors: `migrate .venv/lib/.../torch` walks torch.
        base = self.root
        rel_top = self._relative_parts(absolute_top, self.root)
        if rel_top is None or (rel_top and self.excludes.match_file("/".join(rel_top) + "/")):
            base = absolute_top
        found: list[Path] = []
        prefix = "/".join(self._relative_parts(absolute_top, base) or ())
        self._walk(top, absolute_top, prefix, inherited, found)
        return found

    def _ignores_above(self, path: Path) -> list[tuple[Path, GitIgnoreSpec]]:
        """The ignore files of the directories above `path`, up to the repository root,
        shallowest first."""
        ignores = []
        for directory in path.parents:
            spec = self._ignore_spec(directory)
            if spec is not None:
                ignores.insert(0, (directory, spec))
            if (directory / ".git").exists():
                break
        return ignores

    def _ancestor_ignores(self, top: Path) -> list[tuple[Path, GitIgnoreSpec]]:
        """Ignore files above `top` up to the repository root, shallowest first."""
        if (top / ".git").exists():
            return []
        ignores = self._ignores_above(top)
        # A directory named on the command line is walked even if an ignore file ignores it.
        if _ignored(top, True, ignores):
            return []
        return ignores

    def _walk(self, path: Path, absolute: Path, prefix: str, ignores, found: list[Path]) -> None:
        """Collect the files below `path`; `prefix` is its path relative to the excludes'
        base, carried down as a string (no per-entry path arithmetic)."""
        own = self._ignore_spec(absolute)
        if own is not None:
            ignores = [*ignores, (absolute, own)]
        try:
            entries = sorted(os.scandir(path), key=lambda entry: entry.name)
        except OSError:
            return  # unreadable directory: nothing to migrate in it
        for entry in entries:
            if entry.is_symlink():
                continue  # never followed: a walk stays inside its tree and cannot loop
            is_dir = entry.is_dir(follow_symlinks=False)
            if not is_dir and not entry.name.endswith(SOURCE_SUFFIXES):
                continue
            child_absolute = absolute / entry.name
            rel = f"{prefix}/{entry.name}" if prefix else entry.name
            if self.excludes.match_file(rel + "/" if is_dir else rel):
                continue
            if ignores and _ignored(child_absolute, is_dir, ignores):
                continue
            if is_dir:
                self._walk(path / entry.name, child_absolute, rel, ignores, found)
            elif entry.is_file(follow_symlinks=False):
                found.append(path / entry.name)

    @staticmethod
    def _relative_parts(absolute: Path, base: Path) -> tuple[str, ...] | None:
        try:
            return absolute.relative_to(base).parts
        except ValueError:
            return None

    def _ignore_spec(self, directory: Path) -> GitIgnoreSpec | None:
        if directory not in self._ignore_files:
            spec = None
            try:
                lines = (directory / ".gitignore").read_text(errors="replace").splitlines()
            except OSError:
                lines = None
            if lines:
                from pathspec import GitIgnoreSpec

                spec = GitIgnoreSpec.from_lines(lines)
            self._ignore_files[directory] = spec
        return self._ignore_files[directory]


def _ignored(absolute: Path, is_dir: bool, ignores) -> bool:
    """As git: the deepest ignore file with a matching pattern decides (`!` re-includes)."""
    for directory, spec in reversed(ignores):
        rel = os.path.relpath(absolute, directory)
        verdict = spec.check_file(rel + "/" if is_dir else rel).include
        if verdict is not None:
            return verdict
    return False
