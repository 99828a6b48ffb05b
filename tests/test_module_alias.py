"""`module_alias` (analysis/model/chains.py): the one object a native DDP program names as
wrapped or not (`raw = model.module if ddp else model`), read by the rules that rebind,
place and note such names."""

from __future__ import annotations

import ast

import pytest

from migrator.analysis.model.chains import module_alias


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model", ("model", False)),
        ("model.module", ("model", True)),
        ("model.module if ddp else model", ("model", True)),
        ("model if not ddp else model.module", ("model", True)),
        ("model.module if ddp else model.module", ("model", True)),
        ("model.module if ddp else other", None),
        ("self.model.module", None),
        ("model.net", None),
        ("get(model)", None),
    ],
)
def test_the_object_a_value_names_wrapped_or_not(text, expected):
    assert module_alias(ast.parse(text, mode="eval").body) == expected
