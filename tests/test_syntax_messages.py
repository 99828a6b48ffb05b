"""A file the parser refuses gets one line naming the cause; an f-string the running Python's
grammar refuses may be valid on Python 3.12 (PEP 701), and the line says so."""

from __future__ import annotations

import sys

import pytest

from migrator.engine import migrate_bytes

TRAINING_HEAD = b"import torch\nloss = torch.zeros(1, requires_grad=True)\nloss.backward()\n"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 parses PEP 701 f-strings")
def test_a_pep_701_f_string_names_the_python_that_parses_it():
    result = migrate_bytes(TRAINING_HEAD + b'x = {"a": 1}\nprint(f"{x["a"]}")\n', "t.py")
    assert result.error is not None and result.error.startswith("cannot parse: f-string")
    assert "(line 5, column" in result.error
    assert "run migrate under Python 3.12 or later" in result.error


def test_other_syntax_errors_keep_their_one_line():
    result = migrate_bytes(TRAINING_HEAD + b"def broken(:\n", "t.py")
    assert result.error is not None and result.error.startswith("cannot parse: ")
    assert "3.12" not in result.error and "\n" not in result.error
