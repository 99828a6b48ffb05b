"""Obligation 3, gathers: a loop that gathers its batches (`accelerator.gather_for_metrics`,
`gather`) draws them from prepared loaders only. A loader left plain gives every process the
whole set, and gathering it returns N copies of it (h10 review: an evaluation helper the
migration gathers in, called later with test loaders it did not prepare, counted every
sample twice on two processes). Which loader a loop draws from, in every context its
function is called in, is the values model's (a parameter holds "plainloader" where a call
passes a loader not prepared)."""

from __future__ import annotations

import ast

from migrator.analysis.model.origins import argument_for
from migrator.findings import Finding
from migrator.soundness.model import OutputModel

CODE = "MIG953"
GATHERS = {"gather", "gather_for_metrics"}
LOOPS = (ast.For, ast.AsyncFor)


def plain_gathers(model: OutputModel) -> list[Finding]:
    values = model.values()
    found = []
    for site in model.accelerator_calls(GATHERS):
        func = site.node.func
        if not model.processes.runs_on_every_process(site.statement):
            continue
        loop = _loop_around(site)
        source = _source(loop.iter) if loop is not None else None
        if source is None or not _plain(model, values, source, site.scope):
            continue
        found.append(Finding(code=CODE, node=site.node, message=(
            f"`{model.source.text_of(func)}(...)` gathers the batches of "
            f"`{model.source.text_of(source)}`, which {model.where(site.statement)} is a loader "
            "left plain: every process reads the whole set, and the gather returns it N "
            "times; prepare that loader too, or gather only where the loader is prepared, "
            "by hand")))  # fmt: skip
    return found


DICT_READS = {"items", "keys", "values", "get", "to", "cuda", "cpu"}


def object_gathers(model: OutputModel) -> list[Finding]:
    """Obligation 3, what is gathered: a loop's whole batch handed to a gather where the loop
    reads it as an object of attributes (`data.y` of a graph batch), not as a dict or a
    tensor. It is not a tree of tensors, so each process's is gathered as one object (a
    list per process, never cut at the padding), and the outputs beside it count the
    samples another way (nodes, not graphs): refused, so that the evaluation stays on the
    whole set (the engine's plain version) or is gathered by hand."""
    found = []
    for site in model.accelerator_calls(GATHERS):
        func = site.node.func
        loop = _loop_around(site)
        if not site.node.args or loop is None or not isinstance(loop.target, ast.Name):
            continue
        batch = loop.target.id
        argument = site.node.args[0]
        parts = argument.elts if isinstance(argument, (ast.Tuple, ast.List)) else [argument]
        if not any(isinstance(p, ast.Name) and p.id == batch for p in parts):
            continue
        read = next((n.attr for n in ast.walk(loop) if isinstance(n, ast.Attribute)
                     and isinstance(n.value, ast.Name) and n.value.id == batch
                     and n.attr not in DICT_READS), None)  # fmt: skip
        if read is None:
            continue
        found.append(Finding(code=CODE, node=site.node, message=(
            f"`{model.source.text_of(func)}(...)` gathers `{batch}`, the loop's whole batch, "
            f"which the loop reads as an object (`{batch}.{read}`): it is gathered as one "
            "object per process, not cut at the padding, and the values beside it may count "
            "other units (nodes, not graphs); gather the tensors it holds, per sample, by "
            "hand")))  # fmt: skip
    return found


def _loop_around(site) -> ast.AST | None:
    """The innermost `for` loop around the call, in its function."""
    return next((s.node for s in reversed(site.statement.chain()[:-1])
                 if isinstance(s.node, LOOPS)), None)  # fmt: skip


def _plain(model: OutputModel, values, source: ast.expr, scope, depth: int = 0) -> bool:
    """Is `source` a plain loader in some context: a name never prepared where the loop
    reads it, or a parameter some call passes one (each call's argument judged on its own:
    an attribute bound plain and then prepared holds both roles, and is prepared where read)."""
    roles = values.roles(source, scope)
    if "plainloader" not in roles:
        return False
    if "loader" not in roles:
        return True
    if not (isinstance(source, ast.Name) and source.id in scope.params) or depth > 2:
        return False
    for site in model.graph.callers(scope):
        argument = argument_for(site.node, scope, source.id)
        if argument is not None and _plain(model, values, argument, site.scope, depth + 1):
            return True
    return False


def _source(iterable: ast.expr) -> ast.expr:
    """The loader a loop draws from, through `enumerate(...)`, `tqdm(...)`, `zip(...)`."""
    while isinstance(iterable, ast.Call) and iterable.args:
        iterable = iterable.args[0]
    return iterable
