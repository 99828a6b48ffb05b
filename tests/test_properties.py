"""Properties over generated programs: output parses, migrating twice equals migrating once,
torch-free code is byte-identical, and seed-shaped scripts lose every placement the prepared
objects make redundant while gaining exactly one, early enough, prepare."""

from __future__ import annotations

import ast

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrator.engine import Options, migrate_bytes, migrate_text
from tests.strategies import Script, training_scripts

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(hypothesmith.from_grammar())
def test_torch_free_programs_are_byte_identical(source):
    data = source.encode("utf-8")
    result = migrate_bytes(data, "generated.py", Options())
    assert result.error is None or "cannot" in result.error
    assert result.migrated is None


@SETTINGS
@given(st.text(alphabet="abc()=.:\n #backward", max_size=200))
def test_arbitrary_text_never_crashes_the_engine(text):
    result = migrate_bytes(text.encode(), "noise.py", Options())
    assert result.error is None or not result.error.startswith("internal error"), result.error


def _calls(tree: ast.AST, attribute: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == attribute
    ]


@SETTINGS
@given(training_scripts())
def test_seed_shaped_scripts_migrate_correctly(script: Script):
    output, findings = migrate_text(script.source)
    assert output is not None
    assert not [f for f in findings if f.level == "warning"]
    tree = ast.parse(output)

    # Idempotent.
    again, _ = migrate_text(output)
    assert again is None

    # Every backward goes through the accelerator.
    backwards = _calls(tree, "backward")
    assert backwards
    assert all(isinstance(c.func.value, ast.Name) and c.func.value.id == "accelerator"
               for c in backwards)  # fmt: skip

    # Exactly one prepare, holding the model, optimizer and loader, before the first loop and
    # before any len(loader).
    prepares = _calls(tree, "prepare")
    assert len(prepares) == 1
    prepared = [a.id for a in prepares[0].args if isinstance(a, ast.Name)]
    assert {script.model, script.optimizer, script.loader} <= set(prepared)
    first_loop = min(n.lineno for n in ast.walk(tree) if isinstance(n, ast.For))
    assert prepares[0].lineno < first_loop
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
            assert node.lineno > prepares[0].lineno

    # No placement left on batches or on the prepared model.
    for call in _calls(tree, "to") + _calls(tree, "cuda"):
        receiver = call.func.value
        while isinstance(receiver, ast.Subscript):
            receiver = receiver.value
        assert not (isinstance(receiver, ast.Name) and receiver.id in
                    (*script.batch_names, script.model, "t")), ast.unparse(call)  # fmt: skip

    # One import, one accelerator, created before it is used.
    assert output.count("from runtime import Accelerator") == 1
    assert output.count("Accelerator()") == 1
    creation = output.index("= Accelerator()")
    assert creation < output.index("accelerator.prepare(")
