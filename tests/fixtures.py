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


def is_batch_note(finding) -> bool:
    """MIG006's note on the global batch (SPEC §3b.8, rules/global_batch.py)."""
    return finding.code == "MIG006" and "global batch" in finding.message


def without_padding_note(findings: list) -> list:
    """The findings less MIG031's and MIG032's notes on the padded last batches of a loop
    whose per-batch numbers or running sums they reduce (rules/padded_batches.py; asserted in
    test_sum_reductions and test_training_padding_note)."""
    return [
        f for f in findings if not (f.code in ("MIG031", "MIG032") and "even_batches" in f.message)
    ]


def without_batch_note(findings: list) -> list:
    """The findings of a migrated program less its global-batch note, which a program whose
    training loader is prepared carries once: checked to be there."""
    notes = [f for f in findings if is_batch_note(f)]
    assert len(notes) == 1, [f.message for f in findings]
    return [f for f in findings if not is_batch_note(f)]
