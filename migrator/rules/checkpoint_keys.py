"""The note on checkpoint keys (SPEC §3b.8): a model the original wrapped itself in
DistributedDataParallel or nn.DataParallel saved `wrapper.state_dict()`, whose keys all start
with `module.`; migrated, the wrapper is gone and the state saved is the plain model's
(`accelerator.unwrap_model(model).state_dict()`), so the keys lose that prefix. Checkpoints
written by the original no longer load into the migrated model as they are, nor these into
code that expects the prefix. Saving `wrapper.module.state_dict()` kept no prefix: no note."""

from __future__ import annotations

import ast

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
        receiver = func.value
        name = (
            receiver.id if isinstance(receiver, ast.Name)
            else f"self.{receiver.attr}" if isinstance(receiver, ast.Attribute)
            and isinstance(receiver.value, ast.Name) and receiver.value.id == "self"
            else None
        )  # fmt: skip
        if name is None or name in said:
            continue
        lines = [line for bound, line in wrapped if name == bound and call.lineno > line]
        if not lines:
            continue
        said.add(name)
        code = "MIG010" if wrapper == "DistributedDataParallel" else "MIG901"
        context.findings.append(Finding(code=code, level="note", node=call, message=(
            f"`{name}.state_dict()` now saves the plain model's keys: where the original had "
            f"wrapped `{name}` in {wrapper} (line {lines[0]}), they all started with `module.`; "
            "checkpoints the original wrote so load into the migrated model only with the prefix "
            "stripped (`{k.removeprefix('module.'): v for k, v in state.items()}`), and code "
            "that expects the prefix must add it")))  # fmt: skip
