"""Text edits that hand the accelerator to a program's helpers (reach.py, classes.py): where a
free name is read, a keyword-only `accelerator` parameter or argument inserted in place,
positions of `ast` nodes in the text."""

from __future__ import annotations

import ast
import re

ACCELERATOR = "accelerator"


LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # lines as the tokenizer counts them


def reads_free(node: ast.AST, name: str) -> bool:
    """Whether code in `node` reads `name` where no enclosing function of `node` binds it."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    if isinstance(node, functions):
        arguments = node.args
        params = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        params += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
        if name in params or (not isinstance(node, ast.Lambda) and assigns_locally(node, name)):
            return False
        stack = list(node.body) if isinstance(node.body, list) else [node.body]
    else:
        stack = [node]
    while stack:
        current = stack.pop()
        if current is not node and isinstance(current, functions):
            if reads_free(current, name):
                return True
            continue
        if (
            isinstance(current, ast.Name)
            and current.id == name
            and isinstance(current.ctx, ast.Load)
        ):
            return True
        stack.extend(ast.iter_child_nodes(current))
    return False


def assigns_locally(function: ast.AST, name: str) -> bool:
    for inner in ast.walk(function):
        if isinstance(inner, ast.Name) and inner.id == name and isinstance(inner.ctx, ast.Store):
            return True
    return False


def binds(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(inner, ast.Name) and inner.id == name and isinstance(inner.ctx, ast.Store)
        for inner in ast.walk(node)
    )


def has_param(node, name: str) -> bool:
    arguments = node.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return any(a.arg == name for a in every)


def offset(text: str, line: int, col: int) -> int:
    """Character offset of an `ast` (line, UTF-8 byte column)."""
    lines = LINES.findall(text)  # as the tokenizer counts them (not str.splitlines: \x0c...)
    start = sum(len(item) for item in lines[: line - 1])
    return start + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))


def parameter_insert(text: str, node) -> tuple[int, str]:
    """`def f(a, b)` -> `def f(a, b, *, accelerator)`; after `*args`/keyword-only parameters
    it joins them; before `**kwargs`."""
    arguments = node.args
    star = arguments.vararg is not None or arguments.kwonlyargs
    new = ACCELERATOR if star else f"*, {ACCELERATOR}"
    if arguments.kwarg is not None:
        at = offset(text, arguments.kwarg.lineno, arguments.kwarg.col_offset)
        return text.rindex("**", 0, at), f"{new}, "
    parts = [
        *arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *arguments.defaults,
        *(d for d in arguments.kw_defaults if d is not None),
        *(a for a in (arguments.vararg,) if a is not None),
    ]  # fmt: skip
    return after_last(text, parts, closing_paren(text, node), new)


def closing_paren(text: str, node) -> int:
    """Offset of the `)` that closes a def's parameter list."""
    first = node.body[0]
    body_at = offset(text, first.lineno, first.col_offset)
    if node.returns is not None:
        body_at = offset(text, node.returns.lineno, node.returns.col_offset)
    return last_code_paren(text, body_at)


def last_code_paren(text: str, before: int) -> int:
    """The last `)` before `before` that is not in a comment."""
    at = before
    while True:
        at = text.rindex(")", 0, at)
        line_start = text.rfind("\n", 0, at) + 1
        if "#" not in text[line_start:at]:
            return at


def argument_insert(text: str, call: ast.Call) -> tuple[int, str]:
    close = offset(text, call.end_lineno, call.end_col_offset) - 1  # the `)`
    parts = [*call.args, *call.keywords]
    return after_last(text, parts, close, f"{ACCELERATOR}={ACCELERATOR}")


def after_last(text: str, parts: list, close: int, new: str) -> tuple[int, str]:
    """Where `new` goes in a comma list: after the last item (and its comma, kept as the list's
    trailing comma), or alone before `close` in an empty list. Comments stay where they are."""
    if not parts:
        return close, new
    end = max(offset(text, p.end_lineno, p.end_col_offset) for p in parts)
    rest = text[end:close]
    stripped = rest.lstrip(" \t")
    if stripped.startswith(","):
        return end + len(rest) - len(stripped) + 1, f" {new},"
    return end, f", {new}"


def apply_inserts(text: str, inserts: list[tuple[int, str]]) -> str:
    for at, new in sorted(inserts, reverse=True):
        text = text[:at] + new + text[at:]
    return text
