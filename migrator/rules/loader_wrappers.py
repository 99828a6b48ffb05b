"""A DataLoader re-bound to the user's own wrapper before training
(`loader = WrappedDataLoader(loader, to_device)`, whose `__iter__` yields `fn(*batch)`):
`accelerator.prepare` of the wrapper passes it through as it is, so nothing would be sharded
and every process would train on all the data (a gathered metric counting each sample N
times), with no error. The DataLoader is prepared on its own just before it is wrapped,
and left out of the shared `prepare`:

    loader = DataLoader(dataset, batch_size=8)
    loader = accelerator.prepare(loader)
    loader = WrappedDataLoader(loader, to_device, device)

A wrap in another block than the DataLoader's (under an `if`) is refused by name: a prepare
there would leave the other path unsharded.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.analysis import patterns
from migrator.analysis.index import Binding, Scope
from migrator.findings import Finding
from migrator.rules.base import RuleContext


@dataclass
class Rewrap:
    name: str
    made: Binding  # `loader = DataLoader(...)`
    wrap: Binding  # `loader = Wrapper(loader, ...)`

    @property
    def same_block(self) -> bool:
        return self.made.statement.block is self.wrap.statement.block

    def refusal(self, context: RuleContext) -> Finding:
        wrapper = context.source.text_of(self.wrap.value.func)
        made, wrap = self.made.small.lineno, self.wrap.small.lineno
        return Finding(
            code="MIG900",
            node=self.wrap.small,
            message=f"`{self.name}` (the DataLoader made at line {made}) is re-bound to "
            f"`{wrapper}(...)` at line {wrap}, in another block, which `accelerator.prepare` "
            "would pass through unsharded: every process would train on all the data; "
            f"prepare the DataLoader before line {wrap} on every path and wrap the prepared "
            "one, by hand",
        )


def rewrapped_loaders(context: RuleContext, scope: Scope, names: list[str]) -> list[Rewrap]:
    """The loaders among `names` that `scope` builds as a DataLoader and then re-binds to a
    call taking the loader itself (the first such re-binding each)."""
    imports = context.facts.index.imports
    found = []
    for name in names:
        if context.role(scope, name) != "loader":
            continue
        made = None
        bindings = [b for b in scope.assigns(name) if b.small is not None]
        for binding in sorted(bindings, key=lambda b: (b.small.lineno, b.small.col_offset)):
            call = binding.value if not binding.unpacked else None
            if not isinstance(call, ast.Call):
                continue
            if patterns.is_loader_call(call, imports):
                made = binding
                continue
            arguments = [*call.args, *(k.value for k in call.keywords)]
            if made is not None and any(
                isinstance(arg, ast.Name) and arg.id == name for arg in arguments
            ):
                found.append(Rewrap(name, made, binding))
                break
    return found
