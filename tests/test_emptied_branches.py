"""An `if` chain some of whose branches the edits emptied reads as a person would write it:
no `else: pass`, no `if c: pass` in front of an `else:` that keeps statements, and never a
change to which branch runs."""

from __future__ import annotations

import ast
import itertools
from types import SimpleNamespace

import pytest

from migrator.branches import negated
from migrator.engine import migrate_text
from tests.test_edits import edited, smalls


def removing(*codes: str):
    """Register the removal of the simple statements whose code is one of `codes`."""

    def register(tree, index, edits):
        for small in smalls(tree, (ast.Expr, ast.Assign)):
            if ast.unparse(small) in codes:
                edits.remove(small)

    return register


def test_an_emptied_if_before_a_kept_else_takes_the_negated_test():
    """The research_ddp shape: `if "RANK" in env and ...: <set-up that went>` / `else:
    print(...); return`."""
    source = (
        "def init(args):\n"
        '    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:\n'
        '        args.rank = int(os.environ["RANK"])\n'
        "    else:\n"
        '        print("Not using distributed mode")\n'
        "        return\n"
        "    setup()\n"
    )
    out = edited(source, removing("args.rank = int(os.environ['RANK'])"))
    assert out == (
        "def init(args):\n"
        '    if not ("RANK" in os.environ and "WORLD_SIZE" in os.environ):\n'
        '        print("Not using distributed mode")\n'
        "        return\n"
        "    setup()\n"
    )


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ("a in b", "a not in b"),
        ("a not in b", "a in b"),
        ("args.gpu is not None", "args.gpu is None"),
        ("args.gpu is None", "args.gpu is not None"),
        ("rank == 0", "rank != 0"),
        ("rank != 0", "rank == 0"),
        ("distributed", "not distributed"),
        ("args.distributed", "not args.distributed"),
        ("torch.cuda.is_available()", "not torch.cuda.is_available()"),
        ("not ready", "ready"),
        ("a < b", "not (a < b)"),
        ("a == b == c", "not (a == b == c)"),
        ("a or b", "not (a or b)"),
        ("(a or b)", "not (a or b)"),
        ("x == (1,\n        2)", "x != (1,\n        2)"),
        ('d["in"] in keys', 'd["in"] not in keys'),
    ],
)
def test_a_test_is_negated_simply(test, expected):
    assert negated(test) == expected
    names = sorted({n.id for n in ast.walk(ast.parse(test)) if isinstance(n, ast.Name)})
    values = [0, 1, 2, None, "in", (1, 2)]
    for combination in itertools.product(values, repeat=len(names)):
        env = dict(zip(names, combination))
        env.update(args=SimpleNamespace(gpu=env.get("b"), distributed=env.get("a")),
                   torch=SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: True)),
                   d={"in": env.get("a")}, keys=[0, 1], os=None)  # fmt: skip
        try:
            before = eval(f"not ({test})", env)
        except TypeError:  # `None < 0`
            continue
        assert bool(eval(expected, env)) == before, (test, env)


def test_an_emptied_else_goes_while_its_if_keeps_statements():
    source = "if a:\n    y()\nelse:\n    x()\nz()\n"
    assert edited(source, removing("x()")) == "if a:\n    y()\nz()\n"


def test_an_emptied_else_after_an_elif_goes():
    source = "if a:\n    y()\nelif b:\n    w()\nelse:\n    x()\n"
    assert edited(source, removing("x()")) == "if a:\n    y()\nelif b:\n    w()\n"


def test_an_emptied_elif_in_front_of_a_kept_else_takes_the_negated_test():
    """Dropping it would run the else for `b`; `elif not b:` runs the else body exactly when
    the old chain did."""
    source = "if a:\n    y()\nelif b:\n    x()\nelse:\n    w()\n"
    assert edited(source, removing("x()")) == "if a:\n    y()\nelif not b:\n    w()\n"


def test_an_emptied_elif_in_front_of_another_elif_keeps_its_pass():
    source = "if a:\n    y()\nelif b:\n    x()\nelif c:\n    w()\n"
    assert (
        edited(source, removing("x()")) == "if a:\n    y()\nelif b:\n    pass\nelif c:\n    w()\n"
    )


def test_an_emptied_if_in_front_of_an_elif_keeps_its_pass():
    source = "if a:\n    x()\nelif b:\n    w()\n"
    assert edited(source, removing("x()")) == "if a:\n    pass\nelif b:\n    w()\n"


def test_a_trailing_emptied_elif_goes_when_its_test_does_nothing():
    source = "if a:\n    y()\nelif args.b is not None:\n    x()\n"
    assert edited(source, removing("x()")) == "if a:\n    y()\n"


def test_a_trailing_emptied_elif_whose_test_calls_stays():
    """`elif check():` may do something (print, count, raise): the call stays."""
    source = "if a:\n    y()\nelif check():\n    x()\n"
    assert edited(source, removing("x()")) == "if a:\n    y()\nelif check():\n    pass\n"


def test_trailing_emptied_elif_and_else_go_together_when_quiet():
    source = "if a:\n    y()\nelif b:\n    x()\nelse:\n    x()\n"
    assert edited(source, removing("x()")) == "if a:\n    y()\n"


def test_an_emptied_elif_with_a_walrus_before_an_emptied_else_stays():
    source = "if a:\n    y()\nelif (n := b):\n    x()\nelse:\n    x()\n"
    assert edited(source, removing("x()")) == "if a:\n    y()\nelif (n := b):\n    pass\n"


def test_an_if_whose_branches_all_emptied_is_left_to_the_renderer():
    source = "if a:\n    x()\nelse:\n    x()\n"
    assert edited(source, removing("x()")) == "if a:\n    pass\nelse:\n    pass\n"


def test_a_comment_left_in_an_emptied_branch_keeps_the_branch():
    """The comment a blank line above a removed statement stays (the rule for removals), so
    the branch it sits in stays too, rather than the comment landing in the other branch."""
    source = "if a:\n    # explains a\n\n    x()\nelse:\n    y()\n"
    assert edited(source, removing("x()")) == "if a:\n    pass\n    # explains a\nelse:\n    y()\n"


def test_a_comment_directly_above_the_removed_statement_goes_with_it():
    source = "if a:\n    # set x\n    x()\nelse:\n    y()\n"
    assert edited(source, removing("x()")) == "if not a:\n    y()\n"


def test_a_comment_on_the_else_line_keeps_the_shape():
    source = "if a:\n    x()\nelse:  # single process\n    y()\n"
    assert edited(source, removing("x()")) == "if a:\n    pass\nelse:  # single process\n    y()\n"


def test_a_nested_if_in_an_edited_block_is_tidied():
    source = "def f():\n    for i in r:\n        if i in seen:\n            x()\n        else:\n            y()\n"
    assert edited(source, removing("x()")) == (
        "def f():\n    for i in r:\n        if i not in seen:\n            y()\n"
    )


def test_a_statement_starting_with_elif_in_an_else_is_not_an_elif():
    source = "if a:\n    x()\nelse:\n    elif_count = 1\n"
    assert edited(source, removing("x()")) == "if not a:\n    elif_count = 1\n"


GUARDED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
is_cuda = torch.cuda.is_available()
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
{guard}
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "guard",
    [
        "    if is_cuda:\n        x = x.cuda()\n        y = y.cuda()",
        (
            "    with torch.no_grad():\n        if torch.cuda.is_available():\n"
            "            x, y = x.cuda(), y.cuda()"
        ),
    ],
)
def test_a_guard_that_only_placed_the_batch_goes_with_the_placement(guard):
    output, _ = migrate_text(GUARDED.format(guard=guard))
    loop = output[output.index("for x, y in loader:") :]
    assert loop.splitlines()[1] == "    loss = torch.nn.functional.mse_loss(model(x), y)"
    assert "pass" not in output and "no_grad" not in output


@pytest.mark.parametrize(
    ("guard", "kept"),
    [
        (  # the else branch keeps statements: the if stays, negated
            "    if is_cuda:\n        x = x.cuda()\n    else:\n        print('cpu')",
            "    if not is_cuda:\n        print('cpu')",
        ),
        (  # a test that calls something stays, with its pass
            "    if check(x):\n        x = x.cuda()",
            "    if check(x):\n        pass",
        ),
    ],
)
def test_a_guard_that_does_more_stays(guard, kept):
    output, _ = migrate_text("def check(x):\n    return True\n" + GUARDED.format(guard=guard))
    assert kept in output.replace("accelerator.print", "print")
