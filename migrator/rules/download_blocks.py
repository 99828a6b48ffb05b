"""Downloads where every process runs them (MIG030): a data set made with `download=True`, a
`gdown.download(...)`, runs inside `with accelerator.main_process_first():` - the main process
downloads, then the others read what it wrote.

The block a download belongs to: a download under a test of
whether the data is there yet (`if not os.path.exists(path): download(...); extract(...);
move(...); remove(zip)`) is one piece of work with its check. Wrapping the download call alone
lets the other processes test before the main process has finished, download again, and
extract or delete while the main process moves the same files (h9 UNet segmentation). The
whole `if`, check included, runs under `main_process_first`: the main process downloads and
prepares the data, then the others test, find it, and skip.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import effects, patterns
from migrator.analysis.syntax.index import Line, Scope, Statement
from migrator.rules.base import RuleContext
from migrator.rules.main_process_writes import indented

EXISTS_CALLS = {"os.path.exists", "os.path.isfile", "os.path.isdir", "os.listdir"}
EXISTS_METHODS = {"exists", "is_file", "is_dir"}
LOOPS = (ast.For, ast.AsyncFor, ast.While)


def checked_block(statement: Statement, imports) -> Statement | None:
    """The outermost `if` around `statement`, within its scope and outside any loop, whose
    test asks whether a path exists; None when there is none."""
    found = None
    for enclosing in statement.chain()[:-1]:
        node = enclosing.node
        if isinstance(node, LOOPS):
            found = None  # a download per pass: the check is the loop's business
            continue
        if isinstance(node, ast.If) and _checks_a_path(node.test, imports):
            found = found or enclosing
    return found


def _checks_a_path(test: ast.expr, imports) -> bool:
    for node in ast.walk(test):
        if not isinstance(node, ast.Call):
            continue
        if (imports.qualify(node.func) or "") in EXISTS_CALLS:
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr in EXISTS_METHODS:
            return not node.args
    return False


def download_main_first(context: RuleContext, scopes: list[Scope]) -> None:
    """A data set made with `download=True` where every process runs it: inside
    `with accelerator.main_process_first():` (`PartialState().main_process_first()` on import
    where the Accelerator takes arguments a function computes, so the download does not pull
    it out of that function)."""
    imports = context.facts.index.imports
    wrapped: set[int] = set()
    for scope in scopes:
        for site in scope.calls:
            effect = effects.effect_of(site.node, imports)
            if effect is None or effect.kind != "download":
                continue
            statement = site.statement
            block = checked_block(statement, imports)  # `if not exists: download; extract`
            if block is not None and not _meets_others(context, block):
                if id(block.node) in wrapped:
                    continue
                wrapped.add(id(block.node))
                statement = block
            elif not isinstance(statement.node, Line) or len(statement.node.body) != 1:
                continue
            if (
                not context.processes.runs_on_every_process(statement)
                or statement.block.kind == "suite"
            ):
                continue
            if scope.kind == "module" and _made_in_a_function(context):
                header = f"with {context.state_expr('main_process_first')}():"
                context.edits.replace(statement.node, indented(context, statement, header))
                continue
            header = f"with {context.accelerator_expr('main_process_first')}():"
            context.edits.replace(statement.node, indented(context, statement, header))

            def fallback(statement=statement) -> None:  # where the accelerator cannot be seen
                context.edits.cancel(statement.node)
                header = f"with {context.state_expr('main_process_first')}():"
                context.edits.replace(statement.node, indented(context, statement, header))

            context.need_accelerator_at(statement, fallback=fallback)


def _meets_others(context: RuleContext, statement: Statement) -> bool:
    """Does the statement train, or call the accelerator (a barrier, a gather)? Under
    `main_process_first` the main process would wait there for processes that wait for it."""
    facts = context.facts
    if any(loop.statement.ancestor_in(statement.block) is statement
           for loop in [*facts.training_loops, *facts.eval_loops]):  # fmt: skip
        return True
    for call in ast.walk(statement.node):
        called = patterns.name_of(call.func) if isinstance(call, ast.Call) else None
        if called and called.rsplit(".", 1)[0] in facts.accelerator_names:
            return True
    return False


def _made_in_a_function(context: RuleContext) -> bool:
    """Does the Accelerator take arguments a function computes (`gradient_accumulation_steps=
    args.accum` from `main()`)? Then a download on import runs first on the main process
    through the process-wide state, and the Accelerator stays where its arguments are."""
    module = context.facts.index.module_scope
    return any(not module.assigns(name) for kwarg in context.kwargs for name in kwarg.depends_on)
