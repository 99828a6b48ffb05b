"""The note on checkpoint keys (SPEC §3b.8): a model the original wrapped itself in
DistributedDataParallel or nn.DataParallel saved `wrapper.state_dict()`, whose keys all start
with `module.`; migrated, the wrapper is gone and the state saved is the plain model's
(`accelerator.unwrap_model(model).state_dict()`), so the keys lose that prefix. Checkpoints
written by the original no longer load into the migrated model as they are, nor these into
code that expects the prefix. Saving `wrapper.module.state_dict()` kept no prefix: no note."""

from __future__ import annotations

import ast

from migrator.analysis.syntax.index import Line
from migrator.findings import Finding
from migrator.rules.base import RuleContext


def prefix_notes(context: RuleContext, wrapped: list[tuple[str, int]], wrapper: str) -> None:
    """A note at each `<name>.state_dict()` after the line where the original bound `name`
    to the wrapper (`wrapped`: (name, line) pairs), once per name."""
    said: set[str] = set()
    for site in context.facts.index.calls():
        call = site.node
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr != "state_dict":
            continue
        name = _wrapper_name(func.value)
        if name is None or name in said:
            continue
        lines = [line for bound, line in wrapped if name == bound and call.lineno > line]
        if not lines or _unwrapped_beside(site, call, name):
            continue
        said.add(name)
        code = "MIG010" if wrapper == "DistributedDataParallel" else "MIG901"
        context.findings.append(Finding(code=code, level="note", node=call, message=(
            f"`{name}.state_dict()` now saves the plain model's keys: where the original had "
            f"wrapped `{name}` in {wrapper} (line {lines[0]}), they all started with `module.`; "
            "checkpoints the original wrote so load into the migrated model only with the prefix "
            "stripped (`{k.removeprefix('module.'): v for k, v in state.items()}`), and code "
            "that expects the prefix must add it")))  # fmt: skip


def _unwrapped_beside(site, call: ast.Call, name: str) -> bool:
    """`net.module.state_dict() if distributed else net.state_dict()` (or the same in the two
    branches of an `if`): the branch that saves `net` itself runs where it was never wrapped,
    and the other saves the plain module's keys; no key ever had the prefix."""
    statement = site.statement
    own = statement.node.body if isinstance(statement.node, Line) else [statement.node]
    candidates = [n for part in own for n in ast.walk(part) if isinstance(n, ast.IfExp)]
    candidates += [outer.node for outer in statement.chain()[:-1] if isinstance(outer.node, ast.If)]
    for parent in candidates:
        branches = (parent.body, parent.orelse)
        mine = next((b for b in branches if _holds(b, call)), None)
        other = next((b for b in branches if b is not mine), None)
        if mine is not None and other is not None and _reads_module(other, name):
            return True
    return False


def _holds(branch, node: ast.AST) -> bool:
    parts = branch if isinstance(branch, list) else [branch]
    return any(n is node for part in parts for n in ast.walk(part))


def _reads_module(branch, name: str) -> bool:
    """`name.module` read in the branch."""
    parts = branch if isinstance(branch, list) else [branch]
    return any(
        isinstance(n, ast.Attribute) and n.attr == "module"
        and _wrapper_name(n.value) == name
        for part in parts for n in ast.walk(part)
    )  # fmt: skip


def _wrapper_name(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        return f"self.{expr.attr}"
    return None
