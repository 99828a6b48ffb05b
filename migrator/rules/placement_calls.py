"""Stripping device placement from an expression: `x.to(device)` -> `x`, `x.cuda()` -> `x`,
`x.to(device, dtype=torch.float16)` -> `x.to(dtype=torch.float16)`. Shared by MIG003/MIG004."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.syntax.imports import ImportTable
from migrator.analysis.syntax.views import Arg, call_args
from migrator.arglists import call_items

PLACEMENT_KEYWORDS = {"device", "non_blocking", "copy"}


def device_arguments(args: list[Arg], kind: str) -> list[Arg]:
    """The arguments of a placement call that only say where the tensor goes."""
    if kind == "cuda":
        return list(args)
    dropped = []
    plain = [a for a in args if a.plain]
    if plain:
        dropped.append(plain[0])
    dropped += [a for a in args if a.keyword is not None and a.keyword in PLACEMENT_KEYWORDS]
    return dropped


def strip_placement(call: ast.Call, device_names: set[str], imports: ImportTable, edits) -> bool:
    """Register the removal of `call`'s placement; False if it is not a placement call."""
    kind = patterns.placement_call(call, device_names, imports)
    if kind is None:
        return False
    args = call_args(call)
    dropped = device_arguments(args, kind)
    positions = {i for i, arg in enumerate(args) if any(arg is d for d in dropped)}
    drops = [arg.node for arg in dropped]
    if len(positions) == len(args):  # nothing left: the receiver stands for the call
        edits.replace(call, lambda _text, r: r.text_of(call.func.value), drops=drops)
        return True

    def rewrite(_text: str, renderer) -> str:
        items = call_items(renderer, call)
        kept = [item for i, item in enumerate(items.items) if i not in positions]
        items.items = kept
        return items.with_last_comma_dropped().render()

    edits.rewrite(call, rewrite, drops=drops)
    return True
