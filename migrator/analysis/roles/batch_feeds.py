"""What reaches a data region, for MIG004 (SPEC §3b.5): a region's `.to(device)` goes only
where every batch it holds comes from a prepared loader that placed all of it.

- Feeds: a helper handed batches (`batch_loss(model, batch)`) is fed by every call of it. When
  one call passes something no data region holds (`batch_loss(model, next(iter(test_loader)))`
  from a function evaluating a plain loader, a hand-made tensor), the helper is `mixed`: its
  placement stays, moving those to the accelerator's device (a no-op for prepared batches).
- Shapes: a prepared loader moves tensors, lists, tuples and mappings of them, and objects with
  their own `.to` (runtime/data.py, as HF Accelerate's send_to_device). The batches of a
  DataLoader made in this file with the default collate (or `default_collate`, a transformers
  data collator) are such; a collate function of the script's own (DETR's NestedTensor, a
  batch class whose tensors sit on attributes) makes them `opaque`: the placement stays. So
  does a loader made elsewhere whose batches the loop reads by field (`batch.x`).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import argument_for, bindings_of, call_sites_of, value_call
from migrator.analysis.roles.facts import INLINE_LOADER, DataRegion, TrainingFacts

# Attributes a tensor batch has (`batch.shape`): read as fields, they say nothing of its type.
TENSOR_FIELDS = {"shape", "dtype", "device", "data", "T", "mT", "ndim", "is_cuda", "grad", "real",
                 "imag", "layout", "requires_grad", "is_leaf", "names", "nbytes", "itemsize"}  # fmt: skip
KNOWN_COLLATES = {"default_collate", "default_data_collator", "DefaultDataCollator"}


def opaque_loader(facts: TrainingFacts, region: DataRegion, inline: ast.Call | None) -> bool:
    """Whether the batches of the region's loader may hold what a prepared loader does not
    place (a collate function of the script's own, a loader this file does not build)."""
    imports = facts.index.imports
    call = inline
    if call is None and region.loader is not None and region.loader.name != INLINE_LOADER:
        calls = {id(c): c for b in bindings_of(region.loader) if (c := value_call(b)) is not None}
        call = next(iter(calls.values())) if len(calls) == 1 else None
    if call is None or not patterns.is_loader_call(call, imports):
        return _read_as_object(region)  # a loader made elsewhere: judged by how it is read
    collate = patterns.keyword(call, "collate_fn")
    if collate is None or (isinstance(collate.value, ast.Constant) and collate.value.value is None):
        return False
    return not _known_collate(facts, region, collate.value)


def _read_as_object(region: DataRegion) -> bool:
    """The loop reads a field of its batch (`batch.text`, `samples.mask`) that no tensor has:
    an object, whose tensors a prepared loader moves only if it has its own `.to`."""
    for name in region.names or region.seeds:
        for use in region.scope.uses.get(name, []):
            inside = region.loop is None or region.loop.contains(use.loop)
            if inside and use.kind == "attr" and use.call is None \
                    and use.attr not in TENSOR_FIELDS:  # fmt: skip
                return True
    return False


def _known_collate(facts: TrainingFacts, region: DataRegion, expr: ast.expr) -> bool:
    """`default_collate`, `DataCollatorWithPadding(tokenizer)`, or a name bound to one."""
    imports = facts.index.imports
    name = patterns.name_of(expr)
    if name is not None and not isinstance(expr, ast.Call):
        origin = facts.origin(region.loader.scope, name)
        made = [value_call(b) for b in bindings_of(origin)]
        if made and all(c is not None for c in made):
            return all(_known_collate(facts, region, c) for c in made)
    target = expr.func if isinstance(expr, ast.Call) else expr
    last = patterns.last_part(imports.qualify(target) or "")
    return last in KNOWN_COLLATES or (
        last.startswith("DataCollator") and isinstance(expr, ast.Call)
    )


def settle_feeds(facts: TrainingFacts, callee_of) -> None:
    """Each helper region's `mixed` and `opaque`, from every call of its function: fed by a
    region when the argument is a name that region holds at a call inside it."""
    index = facts.index
    helpers = [r for r in facts.regions if r.loop is None]
    changed = True
    while changed:  # a helper of a helper inherits what its own callers feed it
        changed = False
        for helper in helpers:
            mixed, opaque = helper.mixed, helper.opaque
            for site in call_sites_of(index, helper.scope):
                if callee_of(site) is not helper.scope:
                    continue
                argument = next((argument_for(site.node, helper.scope, seed)
                                 for seed in helper.seeds), None)  # fmt: skip
                feeding = [r for r in facts.regions if r.contains(site)
                           and isinstance(argument, ast.Name) and argument.id in r.names]  # fmt: skip
                if not feeding:
                    mixed = True
                for region in feeding:
                    mixed = mixed or region.mixed
                    opaque = opaque or region.opaque
                    if region.loader not in helper.feeds:
                        helper.feeds.append(region.loader)
            if (mixed, opaque) != (helper.mixed, helper.opaque):
                helper.mixed, helper.opaque, changed = mixed, opaque, True
