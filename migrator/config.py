"""`[tool.migrate]` in the nearest pyproject.toml upwards; command-line flags override it.

```toml
[tool.migrate]
target = "accelerate"            # runtime | accelerate
select = ["MIG00"]               # codes or prefixes (or a comma-separated string)
ignore = ["MIG002"]
exclude = ["legacy/", "*_pb2.py"]    # replaces the default excludes
extend-exclude = ["experiments/"]    # adds to them
force-exclude = true
jobs = 4
cache-dir = ".cache/migrate"         # default: .migrate_cache beside this file
```
The nearest pyproject.toml that has a `[tool.migrate]` table wins, searched from the common
directory of the paths given (the current directory for stdin). Exclude globs and cache-dir
are relative to that file's directory. Unknown keys are an error: a typo must not silently do
nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TARGETS = ("runtime", "accelerate")
KNOWN_KEYS = {
    "target", "select", "ignore", "exclude", "extend-exclude", "force-exclude", "jobs",
    "cache-dir",
    "mixed-precision",  # reserved for the mixed-precision rules
}  # fmt: skip


class ConfigError(Exception):
    """A bad configuration file; str() is `path: error: cause`."""


@dataclass
class Config:
    path: Path | None = None  # the pyproject.toml it came from
    target: str | None = None
    select: str | None = None  # comma-separated, as on the command line
    ignore: str | None = None
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool = False
    jobs: int | None = None
    cache_dir: Path | None = None

    @property
    def root(self) -> Path | None:
        return self.path.parent if self.path is not None else None


def find_pyproject(paths: Iterable[str]) -> Path | None:
    """The nearest pyproject.toml with a [tool.migrate] table, upwards from the paths' common
    directory."""
    start = _common_directory(list(paths))
    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _has_migrate_table(candidate):
            return candidate
    return None


def load_config(paths: Iterable[str]) -> Config:
    found = find_pyproject(paths)
    if found is None:
        return Config()
    return parse_config(found)


def parse_config(path: Path) -> Config:
    table = _read(path).get("tool", {}).get("migrate", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: error: [tool.migrate] must be a table")
    normalised = {key.replace("_", "-"): value for key, value in table.items()}
    unknown = sorted(set(normalised) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: error: unknown key(s) in [tool.migrate]: {', '.join(unknown)}")
    config = Config(path=path)
    target = normalised.get("target")
    if target is not None and target not in TARGETS:
        raise ConfigError(f"{path}: error: target must be one of {', '.join(TARGETS)}")
    config.target = target
    config.select = _codes(path, "select", normalised.get("select"))
    config.ignore = _codes(path, "ignore", normalised.get("ignore"))
    if "exclude" in normalised:
        config.exclude = _globs(path, "exclude", normalised["exclude"])
    config.extend_exclude = _globs(path, "extend-exclude", normalised.get("extend-exclude", []))
    force = normalised.get("force-exclude", False)
    if not isinstance(force, bool):
        raise ConfigError(f"{path}: error: force-exclude must be true or false")
    config.force_exclude = force
    jobs = normalised.get("jobs")
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise ConfigError(f"{path}: error: jobs must be a positive integer")
    config.jobs = jobs
    cache_dir = normalised.get("cache-dir")
    if cache_dir is not None:
        if not isinstance(cache_dir, str) or not cache_dir:
            raise ConfigError(f"{path}: error: cache-dir must be a path")
        config.cache_dir = path.parent / os.path.expanduser(cache_dir)
    return config


def _read(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):  # imported here: most runs find no [tool.migrate] to parse
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"{path}: error: cannot read: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: error: cannot parse: {error}") from None


def _has_migrate_table(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if b"tool.migrate" not in data and b"[tool]" not in data:
        return False  # cheap: most pyproject.toml files say nothing about us
    return "migrate" in _read(path).get("tool", {})


def _codes(path: Path, key: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    raise ConfigError(f"{path}: error: {key} must be a list of rule codes")


def _globs(path: Path, key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: error: {key} must be a list of glob patterns")
    return list(value)


def _common_directory(paths: list[str]) -> Path:
    real = [os.path.abspath(p) for p in paths if p != "-"]
    if not real:
        return Path.cwd()
    common = Path(os.path.commonpath(real))
    return common if common.is_dir() else common.parent
