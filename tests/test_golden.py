"""Golden fixtures: every fixtures/golden/*.in.py migrates to its reviewed *.out.py, and every
fixtures/noop/*.py stays byte-identical. Findings are declared in the fixture itself."""

from __future__ import annotations

import ast

import pytest

from migrator.engine import Options, migrate_bytes, migrate_text
from tests.fixtures import expected_codes, golden_inputs, noop_inputs, output_path


@pytest.mark.parametrize("path", golden_inputs(), ids=lambda p: p.name[: -len(".in.py")])
def test_golden_fixture_migrates_to_reviewed_output(path, update_golden):
    source = path.read_text()
    output, findings = migrate_text(source)
    assert output is not None, "a golden fixture must change"
    expected_file = output_path(path)
    if update_golden:
        expected_file.write_text(output)
    assert output == expected_file.read_text()
    assert sorted(f.code for f in findings) == expected_codes(source)


@pytest.mark.parametrize("path", golden_inputs(), ids=lambda p: p.name[: -len(".in.py")])
def test_golden_output_parses_and_is_stable(path):
    migrated = output_path(path).read_text()
    ast.parse(migrated)
    again, findings = migrate_text(migrated)
    assert again is None, "migrating twice must equal migrating once"
    assert not [f for f in findings if f.level == "warning"]


@pytest.mark.parametrize("path", noop_inputs(), ids=lambda p: p.stem)
def test_noop_fixture_is_left_byte_identical(path):
    data = path.read_bytes()
    result = migrate_bytes(data, str(path), Options())
    assert result.error is None
    assert result.migrated is None
    assert not result.changed
    assert sorted(f.code for f in result.findings) == expected_codes(data.decode())


def test_enough_fixtures_for_the_contract():
    assert len(golden_inputs()) >= 20
    assert len(noop_inputs()) >= 10
