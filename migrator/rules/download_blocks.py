"""The block a download belongs to (MIG030's `main_process_first`): a download under a test of
whether the data is there yet (`if not os.path.exists(path): download(...); extract(...);
move(...); remove(zip)`) is one piece of work with its check. Wrapping the download call alone
lets the other processes test before the main process has finished, download again, and
extract or delete while the main process moves the same files (h9 UNet segmentation). The
whole `if`, check included, runs under `main_process_first`: the main process downloads and
prepares the data, then the others test, find it, and skip.
"""

from __future__ import annotations

import ast

from migrator.analysis.syntax.index import Statement

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
