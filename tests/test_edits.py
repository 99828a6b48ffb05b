"""The edit layer: text edits over `ast` spans, applied bottom-up, keeping the layout a reader
expects (comments stay with the code below them, blocks never end up empty, new code in the
file's own indentation and newline, string contents never re-indented)."""

from __future__ import annotations

import ast
import textwrap

from migrator.analysis.syntax.index import Line, ModuleIndex
from migrator.edits import EditSet, NewStatement
from migrator.import_edits import add_module_imports, remove_unused_imports
from migrator.render import Renderer
from migrator.source import Source


def edited(text: str, register) -> str:
    """`text` after the edits `register(tree, index, edits)` asks for."""
    text = textwrap.dedent(text)
    tree = ast.parse(text)
    source = Source(text)
    index = ModuleIndex(tree, source)
    edits = EditSet()
    register(tree, index, edits)
    return Renderer(source, index, edits).render()


def calls(tree: ast.AST, method: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
    ]


def smalls(tree: ast.AST, kind=ast.Expr) -> list[ast.stmt]:
    return sorted((n for n in ast.walk(tree) if isinstance(n, kind)), key=lambda n: n.lineno)


# -- removals --------------------------------------------------------------------------------
def test_removed_statement_takes_the_comment_directly_above_it():
    """Issue 14: `# Device configuration` does not stay above the blank where `device = ...`
    was; one run of blank lines is left."""
    out = edited(
        """\
        a = 1

        # set up the group
        dist.init()


        b = 2
        """,
        lambda tree, index, edits: edits.remove(smalls(tree)[0]),
    )
    assert out == "a = 1\n\n\nb = 2\n"


def test_removed_statement_leaves_a_comment_a_blank_line_above_it():
    out = edited(
        """\
        a = 1

        # Section: distributed set-up

        dist.init()
        b = 2
        """,
        lambda tree, index, edits: edits.remove(smalls(tree)[0]),
    )
    assert out == "a = 1\n\n# Section: distributed set-up\n\nb = 2\n"


def test_blank_lines_where_two_runs_meet_become_one_run():
    out = edited(
        "a = 1\n\n\nx()\n\nb = 2\n",
        lambda tree, index, edits: edits.remove(smalls(tree)[0]),
    )
    assert out == "a = 1\n\n\nb = 2\n"


def test_comments_of_removed_last_statements_stay_in_their_block():
    out = edited(
        """\
        def f():
            a = 1

            # done

            x()
        g()
        """,
        lambda tree, index, edits: edits.remove(smalls(tree)[0]),
    )
    assert out == "def f():\n    a = 1\n    # done\ng()\n"
    out = edited(  # directly above it, the comment was the statement's: it goes too
        "def f():\n    a = 1\n\n    # call x\n    x()\ng()\n",
        lambda tree, index, edits: edits.remove(smalls(tree)[0]),
    )
    assert out == "def f():\n    a = 1\ng()\n"


def test_an_emptied_block_gets_pass_in_its_own_indentation():
    out = edited(
        "if ready:\n\tx()\nelse: y(); z()\n",
        lambda tree, index, edits: [edits.remove(s) for s in smalls(tree)],
    )
    assert out == "if ready:\n\tpass\nelse: pass\n"


def test_one_statement_of_a_line_goes_with_its_separator():
    first = edited("a(); b()  # both\n", lambda t, i, e: e.remove(smalls(t)[0]))
    last = edited("a(); b()  # both\n", lambda t, i, e: e.remove(smalls(t)[1]))
    assert (first, last) == ("b()  # both\n", "a()  # both\n")


def test_clean_up_drops_only_what_does_nothing_after_the_edits():
    def strip_to(tree, index, edits):
        for call in calls(tree, "to"):
            edits.replace(call, lambda _t, r, c=call: r.text_of(c.func.value))
        for small in smalls(tree, ast.Assign):
            edits.clean_up(small)

    out = edited("x = x.to(device)\ny = z.to(device)\n", strip_to)
    assert out == "y = z\n"


# -- replacements ----------------------------------------------------------------------------
def test_replace_covers_the_node_with_its_parentheses_rewrite_keeps_them():
    def register(tree, index, edits):
        (call,) = calls(tree, "cuda")
        edits.replace(call.func.value, lambda _t, _r: "b")
        (backward,) = calls(tree, "backward")
        edits.rewrite(backward, lambda text, _r: text.replace(".backward()", ".step()"))

    out = edited("y = ((a)).cuda() + (loss.backward())\n", register)
    assert out == "y = b.cuda() + (loss.step())\n"


def test_outer_edits_see_the_inner_ones():
    def register(tree, index, edits):
        (backward,) = calls(tree, "backward")
        (to,) = calls(tree, "to")
        edits.replace(to, lambda _t, r: r.text_of(to.func.value))
        edits.replace(
            backward, lambda _t, r: f"accelerator.backward({r.text_of(backward.func.value)})"
        )

    out = edited("(model(x.to(device))).backward()\n", register)
    assert out == "accelerator.backward((model(x)))\n"


def test_text_of_is_in_characters_on_non_ascii_lines():
    out = edited(
        "é = 'ü'; lösung.to(device)\n",
        lambda tree, index, edits: edits.replace_with(calls(tree, "to")[0], "lösung"),
    )
    assert out == "é = 'ü'; lösung\n"


# -- insertions ------------------------------------------------------------------------------
def test_insertion_uses_the_block_indentation_and_the_file_newline():
    def register(tree, index, edits):
        body = index.block(tree.body[0])
        code = "model, loader = accelerator.prepare(\n    model, loader\n)\n"
        edits.insert(body, 1, NewStatement(code, blank_line_before=True), priority=0)

    out = edited("def main():\r\n\tmodel = Net()\r\n\tfor x in loader:\r\n\t\tpass\r\n", register)
    assert out == (
        "def main():\r\n\tmodel = Net()\r\n\r\n\tmodel, loader = accelerator.prepare(\r\n"
        "\t    model, loader\r\n\t)\r\n\tfor x in loader:\r\n\t\tpass\r\n"
    )


def test_insertions_at_one_place_follow_their_priorities():
    def register(tree, index, edits):
        module = index.module_scope.body
        edits.insert(module, 1, NewStatement("second = 2\n"), priority=10)
        edits.insert(module, 1, NewStatement("first = 1\n"), priority=-10)

    assert edited("import os\nrun()\n", register) == "import os\nfirst = 1\nsecond = 2\nrun()\n"


# -- re-indenting ----------------------------------------------------------------------------
def test_reindenting_a_block_leaves_string_contents_alone():
    text = 'for x in y:\n    s = """\n    kept\n    """\n    f(x,\n      x)\n'

    def register(tree, index, edits):
        body = index.block(tree.body[0])

        def wrap(_text, renderer):
            layout = renderer.block_layout(body)
            block = renderer.span_text(layout.start, layout.end)
            return "for x in y:\n    with acc:\n" + renderer.reindent(block, "    ", "        ")

        edits.replace(tree.body[0], wrap)

    assert edited(text, register) == (
        'for x in y:\n    with acc:\n        s = """\n    kept\n    """\n'
        "        f(x,\n          x)\n"
    )


def test_a_line_is_one_statement_of_its_block():
    tree = ast.parse("a = 1; b = 2\nc = 3\n")
    index = ModuleIndex(tree, Source("a = 1; b = 2\nc = 3\n"))
    first, second = index.module_scope.body.statements
    assert isinstance(first, Line) and len(first.body) == 2
    assert isinstance(second, Line) and len(second.body) == 1


# -- imports ---------------------------------------------------------------------------------
def _removed(text: str, entries) -> str:
    text = textwrap.dedent(text)
    return remove_unused_imports(text, entries, ast.parse(text))


def test_an_unused_name_leaves_a_parenthesized_import_list_cleanly():
    out = _removed(
        """\
        from torch.cuda.amp import (
            GradScaler,
            autocast,
        )
        autocast()
        """,
        [("torch.cuda.amp", "GradScaler", None)],
    )
    assert out == "from torch.cuda.amp import (\n    autocast,\n)\nautocast()\n"


def test_an_import_still_used_somewhere_stays():
    text = "import torch.distributed as dist\n\ndef f():\n    dist.barrier()\n"
    assert _removed(text, [("torch.distributed", None, "dist")]) == text


def test_a_removed_import_takes_its_comment_and_leaves_pass_in_an_emptied_block():
    out = _removed(
        """\
        import os
        try:
            # optional
            import torch.distributed as dist
        except ImportError:
            dist = None
        """,
        [("torch.distributed", None, "dist")],
    )
    assert out == "import os\ntry:\n    pass\nexcept ImportError:\n    dist = None\n"


def test_import_torch_goes_after_the_leading_imports_with_a_blank_line():
    text = '"""Doc."""\nimport os\n# the model\nmodel = 1\n'
    out = add_module_imports(text, ["torch"], ast.parse(text))
    assert out == '"""Doc."""\nimport os\nimport torch\n\n# the model\nmodel = 1\n'
    again = add_module_imports(out, ["torch"], ast.parse(out))
    assert again == out


def test_removing_the_first_import_leaves_no_blank_line_opening_the_file():
    for newline in ("\n", "\r\n"):
        text = newline.join(["import os", "", "import torch", "", "torch.zeros(1)", ""])
        out = remove_unused_imports(text, [("os", None, None)], ast.parse(text))
        assert out == newline.join(["import torch", "", "torch.zeros(1)", ""])


def test_a_file_opening_with_a_blank_line_keeps_it():
    text = "\nimport os\nimport torch\n\ntorch.zeros(1)\n"
    out = remove_unused_imports(text, [("os", None, None)], ast.parse(text))
    assert out == "\nimport torch\n\ntorch.zeros(1)\n"
