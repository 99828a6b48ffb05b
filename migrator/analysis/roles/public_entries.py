"""Public methods of a class this file never makes, whose loaders it prepares elsewhere.

`Pipeline.train(train_loader, val_loader)` in utils/pipeline.py is called here by
`cross_validate()`, which makes the loaders: they are prepared there. `Pipeline` itself is made
by a driver in another file, which may call `train()` with loaders of its own; those arrive
plain (neither sharded nor placed on the device, while the batches' `.to(device)` is gone). The
file cannot see that driver, so a note names the methods and what their callers must do.
"""

from __future__ import annotations

from migrator.analysis.model.origins import call_sites_of, class_methods, is_method
from migrator.analysis.roles.facts import TrainingFacts
from migrator.findings import Finding


def outside_entry_note(facts: TrainingFacts, prepares) -> Finding | None:
    """The note for the public methods whose loader parameters come, in this file, from
    loaders another method makes and prepares (`prepares(name)` says which are prepared)."""
    owner = facts.owner
    if owner is None or not is_method(owner) or list(facts.index.calls_named(owner.parent.name)):
        return None
    loaders = facts.loaders
    methods, received, makers = [], [], []
    for method in class_methods(owner):
        if method.name.startswith("_") or not call_sites_of(facts.index, method):
            continue
        for param in method.params[1:]:
            found = facts.origin(method, param)
            if found is None or found.scope is method or found.name not in loaders:
                continue
            if not prepares(found.name):
                continue
            if method.name not in methods:
                methods.append(method.name)
            if param not in received:
                received.append(param)
            if found.scope.name not in makers:
                makers.append(found.scope.name)
    if not methods:
        return None
    cls = owner.parent.name
    named = ", ".join(f"`{cls}.{m}()`" for m in methods)
    return Finding(
        code="MIG006",
        level="note",
        node=owner.parent.node,
        message=(
            f"{named} {'is' if len(methods) == 1 else 'are'} public and `{cls}` is not made in "
            f"this file: the loaders {'it receives' if len(methods) == 1 else 'they receive'} ("
            + ", ".join(f"`{r}`" for r in received)
            + ") are prepared where "
            + ", ".join(f"`{m}()`" for m in makers)
            + " makes them; a caller in another file must pass loaders prepared with the "
            f"same accelerator (`{_accelerator(facts, cls)}.prepare(loader)`), or its "
            "batches are neither sharded nor placed on the device"
        ),
    )


def _accelerator(facts: TrainingFacts, cls: str) -> str:
    """`pipeline.accelerator` for `Pipeline`'s `self.accelerator`: as a caller would name it."""
    name = facts.accelerator_name
    instance = cls[:1].lower() + cls[1:]
    return instance + name[len("self") :] if name.startswith("self.") else name
