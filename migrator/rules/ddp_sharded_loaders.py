"""MIG907: a loader the program shards itself by this process's rank, through anything but a
DistributedSampler (which MIG010 folds into the prepared loader): a loader built by a helper
handed the rank and the world size (`get_dataloader(..., world_size=world_size, rank=rank)`),
a batch sampler of the program's own given them (`BucketBatchSampler(ds, rank=rank)`).

What it does with them cannot be read here (the helper sits in another module, or does more
than a sampler), and prepare shards the loader again: each process would train on 1/N² of the
data while MIG010 gives the helper the Accelerator's rank (h10 review, a bucketing batch
sampler). Left for a human: drop the program's own sharding and prepare the loader, or keep
it and leave the loader plain.
"""

from __future__ import annotations

import ast

from migrator.analysis.distributed.facts import RANK_CALLS, SAMPLER_CLASSES
from migrator.analysis.syntax.index import Scope
from migrator.findings import Finding
from migrator.rules.base import RuleContext

MAX_HOPS = 2  # names followed from the loader's binding to a call handed the rank


def sharded_loader(context: RuleContext) -> Finding | None:
    """The MIG907 finding on the first loader the program prepares that a call handed this
    process's rank or the world size builds; None where there is none."""
    facts = context.facts
    dist = facts.distributed
    imports = facts.index.imports
    for scope in facts.index.scopes:
        for name in sorted(n for n in facts.loaders if context.prepared(n)):
            for binding in scope.assigns(name):
                found = _handed_rank(
                    binding.value, scope, dist, imports, MAX_HOPS, facts.index.functions
                )
                if found is None:
                    continue
                call, given = found
                callee = ast.unparse(call.func)
                return Finding(code="MIG907", node=binding.value, message=(
                    f"`{name}` is built by `{callee}(...)` at line {call.lineno}, which is "
                    f"handed {given}: the loader is this process's share already, and prepared "
                    "it would be sharded again (each process training on 1/N² of the data); "
                    f"migrate by hand: drop the program's own sharding and prepare `{name}`, "
                    "or keep it and leave the loader plain"))  # fmt: skip
    return None


def _handed_rank(
    value, scope: Scope, dist, imports, hops: int, functions: dict
) -> tuple[ast.Call, str] | None:
    """A call in `value` (or in what a name it reads is bound to, `hops` names deep) handed
    the rank or the world size, with what it was handed; a DistributedSampler is MIG010's."""
    if value is None:
        return None
    for node in ast.walk(value):
        if not isinstance(node, ast.Call):
            continue
        if (imports.qualify(node.func) or "") in SAMPLER_CLASSES:
            continue
        if _folds_its_sampler(node, dist, functions):
            continue  # `get_loader(rank, world_size)` making a DistributedSampler MIG010 folds
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            given = _rank_value(argument, scope, dist, imports)
            if given is not None:
                return node, given
    if hops > 0:
        for node in ast.walk(value):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                for binding in scope.assigns(node.id):
                    if binding.value is not value:
                        found = _handed_rank(
                            binding.value, scope, dist, imports, hops - 1, functions
                        )
                        if found is not None:
                            return found
    return None


def _folds_its_sampler(call: ast.Call, dist, functions: dict, depth: int = 0) -> bool:
    """A function of this file that builds its loader on a DistributedSampler MIG010 folds
    into the prepared loader (itself, or through a function of the file it calls): what it
    does with the rank is that sampler."""
    name = call.func.id if isinstance(call.func, ast.Name) else None
    function = functions.get(name) if name is not None else None
    if function is None:
        return False
    if any(sampler.site.scope is function for sampler in dist.samplers):
        return True
    return depth < 2 and any(
        _folds_its_sampler(site.node, dist, functions, depth + 1) for site in function.calls
    )


def _rank_value(expr: ast.expr, scope: Scope, dist, imports) -> str | None:
    """`rank` (a name the analysis knows as the rank or world size), `dist.get_rank()`."""
    if isinstance(expr, ast.Name) and dist.kind_of(scope, expr.id) is not None:
        return f"`{expr.id}`"
    if isinstance(expr, ast.Call) and (imports.qualify(expr.func) or "") in RANK_CALLS:
        return f"`{ast.unparse(expr)}`"
    return None
