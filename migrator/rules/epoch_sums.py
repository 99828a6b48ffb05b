"""MIG031 on training loops: an epoch's running sum divided by the whole dataset's size.

    running_loss += loss.item() * inputs.size(0)     # in the loop over the prepared loader
    ...
    epoch_loss = running_loss / len(train_dataset)   # after it

On N processes each one sums only its shard, so the quotient is 1/N of the 1-process value,
and whatever reads it (a ReduceLROnPlateau step, "best model" bookkeeping) differs between
processes. Right after the loop the sum is all-reduced (`"sum"`), on every process, so the
quotient is the whole dataset's again (up to the few samples the prepared loader repeats to
even out the last batch). Only sums divided by a size that counts the whole dataset are
touched: `len(loader.dataset)`, `len(dataset)` of a dataset a DataLoader is built on, and
`sizes[phase]` of a dict of such lengths (the torchvision fine-tuning tutorial's
`dataset_sizes`). A running sum divided by `len(loader)` (the batches this process saw) is an
average of this process's batches already, and stays as it is.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.syntax.index import Block, Line, Loop, Scope
from migrator.analysis.syntax.views import keyword_value
from migrator.rules.base import RuleContext
from migrator.rules.metric_values import insert_reduction


def reduce_epoch_sums(context: RuleContext) -> None:
    facts = context.facts
    for region in facts.regions:
        loop = region.loop
        if loop is None or loop not in facts.training_loops:
            continue
        if region.loader is None or not context.prepared(region.loader.name):
            continue
        _reduce_after(context, loop)


def _reduce_after(context: RuleContext, loop: Loop) -> None:
    statement = loop.statement
    block, index = statement.block, statement.index
    sums = _running_sums(context, loop, block, index)
    if not sums:
        return
    divided = _divided_by_dataset(context, block, index, loop.scope, set(sums))
    for name in [n for n in sums if n in divided]:
        insert_reduction(context, block, index + 1, name, "sum", sums[name] == "tensor")
        context.need_accelerator_before(block, index + 1, "accelerator.reduce(...)")


def _running_sums(context: RuleContext, loop: Loop, block: Block, index: int) -> dict:
    """name -> "number" | "tensor": `name += ...` in the loop, set to 0 before it in `block`
    and bound nowhere else in the loop."""
    found: dict[str, str] = {}
    spoiled: set[str] = set()
    for node in ast.walk(loop.node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return {}  # a nested scope: its names are not the loop's
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            added = isinstance(node.op, ast.Add)
            kind = _kind(node.value, context.facts.index.imports) if added else None
            name = node.target.id
            if kind is None or found.get(name, kind) != kind:
                spoiled.add(name)
            else:
                found[name] = kind
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            spoiled.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    scope = loop.scope
    return {
        name: kind for name, kind in found.items()
        if name not in spoiled and _zeroed_before(scope, block, index, name)
    }  # fmt: skip


def _kind(value: ast.expr, imports) -> str | None:
    """A Python number (`loss.item() * x.size(0)`, `(p == y).sum().item()`), a tensor (a sum
    outermost: `torch.sum(preds == labels.data)`, `(p == y).sum().float()`), or None when it
    cannot be told."""
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "item" for c in calls):
        return "number"
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("float", "double", "long", "int")
        and not value.args
    ):  # fmt: skip
        value = value.func.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and (
        value.func.attr == "sum"
    ):  # fmt: skip
        qualified = imports.qualify(value.func) or ""
        return None if qualified.split(".")[0] in ("numpy", "math", "builtins") else "tensor"
    return None


def _zeroed_before(scope: Scope, block: Block, index: int, name: str) -> bool:
    """The binding of `name` that reaches the loop is `name = 0` (or `0.0`) in `block`."""
    earlier = [b for b in scope.assigns(name) if b.statement.block is block
               and b.statement.index < index]  # fmt: skip
    if not earlier:
        return False
    last = max(earlier, key=lambda b: b.statement.index)
    value = last.element if last.unpacked else last.value
    return (
        isinstance(value, ast.Constant) and value.value == 0 and not isinstance(value.value, bool)
    )


def _divided_by_dataset(context, block: Block, index: int, scope: Scope, names: set) -> set:
    """The `names` read after the loop, in `block`, as `name / <whole dataset size>` before any
    rebinding of them."""
    found: set[str] = set()
    rebound: set[str] = set()
    for node in block.statements[index + 1 :]:
        parts = node.body if isinstance(node, Line) else [node]
        for part in parts:
            for inner in ast.walk(part):
                if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Div):
                    name = _root_name(inner.left)
                    if name in names and name not in rebound and _whole_size(
                        context, scope, inner.right
                    ):  # fmt: skip
                        found.add(name)
            if isinstance(part, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = part.targets if isinstance(part, ast.Assign) else [part.target]
                rebound.update(n.id for t in targets for n in ast.walk(t)
                               if isinstance(n, ast.Name))  # fmt: skip
    return found


def _root_name(expr: ast.expr) -> str | None:
    """`running_corrects` of `running_corrects.double()` / `float(total)` / `total`."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args:
            expr = expr.func.value
        elif isinstance(expr, ast.Call) and patterns.name_value(expr.func) in ("float", "int") and (
            len(expr.args) == 1
        ):  # fmt: skip
            expr = expr.args[0]
        else:
            return None


def _whole_size(context: RuleContext, scope: Scope, expr: ast.expr) -> bool:
    """`len(loader.dataset)`, `len(dataset)` of a dataset a DataLoader is built on, or
    `sizes[key]` of a dict bound once to such lengths (`{x: len(ds[x]) for x in ...}`)."""
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name):
        origin = context.facts.origin(scope, expr.value.id)
        bindings = origin.scope.assigns(origin.name) if origin is not None else []
        if len(bindings) != 1 or bindings[0].unpacked:
            return False
        value = bindings[0].value
        lengths = (value.values if isinstance(value, ast.Dict) else
                   [value.value] if isinstance(value, ast.DictComp) else [])  # fmt: skip
        return bool(lengths) and all(_is_len(v) for v in lengths)
    if not _is_len(expr):
        return False
    measured = expr.args[0]
    if isinstance(measured, ast.Attribute) and measured.attr == "dataset":
        return patterns.name_of(measured.value) in context.facts.loaders
    name = patterns.name_of(measured)
    return name is not None and _feeds_a_loader(context, name)


def _is_len(expr: ast.expr) -> bool:
    return (
        isinstance(expr, ast.Call)
        and patterns.name_value(expr.func) == "len"
        and len(expr.args) == 1
        and not expr.keywords
    )


def _feeds_a_loader(context: RuleContext, name: str) -> bool:
    imports = context.facts.index.imports
    for scope in context.facts.index.scopes:
        for site in scope.calls:
            if patterns.is_loader_call(site.node, imports) and patterns.name_of(
                keyword_value(site.node, "dataset", 0)
            ) == name:  # fmt: skip
                return True
    return False
