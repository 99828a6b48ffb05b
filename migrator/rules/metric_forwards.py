"""MIG031's metrics that run the prepared model inside the metric statement:

    total += criterion(model(x), y).item() * len(x)

Gathering the inputs `x` there would run the model on the gathered batch: every process
evaluates the whole set (the right numbers, N times the work, and a model forward on inputs
that are no longer this process's). The forward goes into a name of its own first, and the
outputs are gathered with the targets:

    outputs = model(x)
    outputs, y = accelerator.gather_for_metrics((outputs, y))
    total += criterion(outputs, y).item() * len(outputs)
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.patterns import name_of, preorder
from migrator.analysis.model.chains import chain_text
from migrator.analysis.syntax.index import Block, Line, Scope


def region_models(context, region) -> set[str]:
    """The prepared models a data region's code names: plain names and `self.x`, and models
    held on another object called by their chain (`self.cfg.model(x)`)."""
    scope = region.scope
    names = {
        name for name in [*scope.params, *scope.bindings, *scope.uses]
        if context.prepared_role(scope, name.lstrip("*")) == "model"
    }  # fmt: skip
    chains = {chain_text(call.node.func) for call in scope.calls}
    return names | {
        chain for chain in chains
        if chain is not None and "." in chain and context.prepared_role(scope, chain) == "model"
    }  # fmt: skip


def hoisted_forward(walker, block: Block, index: int, accumulated, names):
    """`total += criterion(model(x), y).item() * len(x)`: the metric runs the prepared
    model on this process's inputs. Gathering `x` would run the model on the whole set
    on every process; the forward goes into a name of its own before the metric
    (`outputs = model(x)`), the outputs are gathered instead of the inputs, and a batch
    size read from an input (`len(x)`, `x.size(0)`) reads the outputs'. The names to
    gather, or None when the statement is not of that shape."""
    forwards = [
        node for expr in accumulated for node in ast.walk(expr)
        if isinstance(node, ast.Call)
        and (name_of(node.func) or chain_text(node.func)) in walker.models  # `cfg.model(x)`
    ]  # fmt: skip
    if len(forwards) != 1 or walker.region.scope.kind == "class":
        return None
    forward = forwards[0]
    inputs = {n for n in _names_in(forward) if n in names}
    if not inputs or any(
        isinstance(n, ast.Attribute) and n.attr in ("to", "cuda") for n in ast.walk(forward)
    ):
        return None  # a placement edit inside: its text could not be copied as it is
    line = block.statements[index]
    if not (isinstance(line, Line) and len(line.body) == 1 and block.kind == "body"):
        return None
    inside = {id(n) for n in ast.walk(forward)}
    sizes = []
    for expr in accumulated:
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id in inputs and id(node) not in inside:
                if not _size_read(expr, node):
                    return None  # the input read beyond its size: by hand
                sizes.append(node)
    fresh = _fresh_name(walker.region.scope, ("outputs", "output_batch", "predictions"))
    code = f"{fresh} = {walker.context.source.text_of(forward)}\n"
    walker.context.edits.insert(block, index, walker.context.statement(code), priority=19)
    walker.context.edits.replace_with(forward, fresh)
    for node in sizes:
        walker.context.edits.replace_with(node, fresh)
    return [fresh, *(n for n in names if n not in inputs)]


def _size_read(expr: ast.AST, name: ast.Name) -> bool:
    """`name` is read for its batch size only: `len(name)`, `name.size(0)`, `name.shape[0]`."""
    for node in ast.walk(expr):
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Name) and func.id == "len" and node.args and node.args[0] is name:
            return True
        if isinstance(func, ast.Attribute) and func.value is name and func.attr == "size":
            return len(node.args) == 1 and _zero(node.args[0])
        shape = node.value if isinstance(node, ast.Subscript) else None
        if isinstance(shape, ast.Attribute) and shape.value is name and shape.attr == "shape":
            return _zero(node.slice)
    return False


def _zero(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Constant) and expr.value == 0


def _fresh_name(scope: Scope, candidates: tuple[str, ...]) -> str:
    """The first of `candidates` the scope neither binds nor reads (numbered if all are)."""
    taken = {*scope.bindings, *scope.uses, *scope.params}
    for name in candidates:
        if name not in taken:
            return name
    number = 1
    while f"{candidates[0]}_{number}" in taken:
        number += 1
    return f"{candidates[0]}_{number}"


def _names_in(expr: ast.AST) -> list[str]:
    return [node.id for node in preorder(expr) if isinstance(node, ast.Name)]
