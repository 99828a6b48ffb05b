"""Stripping device placement from an expression: `x.to(device)` -> `x`, `x.cuda()` -> `x`,
`x.to(device, dtype=torch.float16)` -> `x.to(dtype=torch.float16)`. Shared by MIG003/MIG004."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import patterns
from migrator.analysis.imports import ImportTable

PLACEMENT_KEYWORDS = {"device", "non_blocking", "copy"}


def device_arguments(call: cst.Call, kind: str) -> list[cst.Arg]:
    """The arguments of a placement call that only say where the tensor goes."""
    if kind == "cuda":
        return list(call.args)
    dropped = []
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if positional:
        dropped.append(positional[0])
    dropped += [a for a in call.args if a.keyword is not None and a.keyword.value in
                PLACEMENT_KEYWORDS]  # fmt: skip
    return dropped


def strip_placement(call: cst.Call, device_names: set[str], imports: ImportTable, edits) -> bool:
    """Register the removal of `call`'s placement; False if it is not a placement call."""
    kind = patterns.placement_call(call, device_names, imports)
    if kind is None:
        return False
    dropped = device_arguments(call, kind)
    dropped_positions = [call.args.index(a) for a in dropped]

    def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
        if not isinstance(updated, cst.Call) or not isinstance(updated.func, cst.Attribute):
            return updated
        kept = [a for i, a in enumerate(updated.args) if i not in dropped_positions]
        receiver = updated.func.value
        if not kept:
            return receiver
        # `.to(device, torch.float16)` keeps the dtype as the first positional argument.
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=kept)

    edits.replace(call, rewrite, drops=dropped)
    return True
