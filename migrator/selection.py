"""`--select` / `--ignore`: rule codes, prefixes (`MIG00`) or `ALL`, as in ruff and TorchFix."""

from __future__ import annotations

from migrator.rule_table import rule_codes  # not rules.catalogue: that imports every rule


class SelectionError(ValueError):
    pass


def _expand(spec: str) -> set[str]:
    RULE_CODES = rule_codes()
    codes: set[str] = set()
    for raw in spec.split(","):
        token = raw.strip().upper()
        if not token:
            continue
        if token == "ALL":
            codes.update(RULE_CODES)
            continue
        matched = {code for code in RULE_CODES if code.startswith(token)}
        if not matched:
            raise SelectionError(f"unknown rule code or prefix {raw.strip()!r}")
        codes.update(matched)
    return codes


def parse_selection(select: str | None, ignore: str | None) -> frozenset[str]:
    chosen = _expand(select) if select else set(rule_codes())
    if ignore:
        chosen -= _expand(ignore)
    return frozenset(chosen)
