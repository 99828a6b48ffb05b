"""Where the fixtures live and what they declare."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "fixtures" / "golden"
NOOP = ROOT / "fixtures" / "noop"
EXPECT = re.compile(r"^# migrate-expect: (.+)$", re.MULTILINE)


def golden_inputs() -> list[Path]:
    return sorted(GOLDEN.glob("*.in.py"))


def noop_inputs() -> list[Path]:
    return sorted(NOOP.glob("*.py"))


def expected_codes(source: str) -> list[str]:
    """Finding codes a fixture declares with `# migrate-expect: MIG006, MIG906`."""
    codes: list[str] = []
    for match in EXPECT.finditer(source):
        codes.extend(code.strip() for code in match.group(1).split(","))
    return sorted(codes)


def output_path(path: Path) -> Path:
    return path.with_name(path.name.replace(".in.py", ".out.py"))
