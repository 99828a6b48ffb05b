"""NVIDIA Apex AMP (`model, optimizer = amp.initialize(model, optimizer, opt_level=...)`): it
patches the model and the optimizer it is given and scales the loss through the optimizer it
returned (`with amp.scale_loss(loss, optimizer) as scaled: scaled.backward()`). A prepared
optimizer is not that one, so the training it does cannot be kept as it is; Accelerate's own
mixed precision (`mixed_precision=` and `accelerator.backward(loss)`) replaces it, by hand
(its O2/O3 levels keep fp16 weights, which compute differently)."""

from __future__ import annotations

from migrator.analysis.syntax.index import ModuleIndex

APEX_AMP = {"apex.amp.initialize"}
APEX_WORDS = (
    "the model and the optimizer go through NVIDIA Apex AMP (`amp.initialize(...)` at line "
    "{line}), which patches them and scales the loss through the optimizer it returned; a "
    "prepared optimizer is not that one: replace Apex with `Accelerator(mixed_precision="
    '"fp16")` and `accelerator.backward(loss)` (its O2/O3 levels compute differently), by hand'
)


def apex_amp(index: ModuleIndex) -> list[tuple]:
    """(node, message) for the first `amp.initialize(...)` of the program, if any."""
    for site in index.calls():
        if site.callee in APEX_AMP:
            return [(site.node, APEX_WORDS.format(line=site.node.lineno))]
    return []
