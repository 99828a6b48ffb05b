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

from migrator.analysis.catalogue import patterns
from migrator.analysis.syntax.index import Binding, Scope
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


def leave_listed_batches(context: RuleContext) -> None:
    """The loaders of the prepare plan that are Python lists of batches a function of this
    file builds (`data, vocab = load_data()`, where `load_data` returns `data = []` filled
    with `data.append(batch)`), or instances of a class of the file that yields its batches
    itself (`for x, y in GPULoader(x, y, 64)`, no DataLoader), leave the plan, with a note:
    `prepare` returns them as they are, so their batches keep the script's own `.to(device)`
    and each process trains on every batch, as under torchrun DDP. Runs before the rules,
    which read the plan."""
    plan = context.plan
    if plan.block is None:
        return
    scope = plan.block.scope
    for name in list(plan.objects):
        if context.role(scope, name) != "loader":
            continue
        bindings = scope.assigns(name)
        foreign = [_foreign_iterable(context, b) for b in bindings]
        if bindings and all(foreign) and foreign[0].startswith("a `range`"):
            plan.objects.remove(name)  # the loop counts steps: its batches come from elsewhere
            context.block_file(Finding(
                code="MIG900", node=bindings[0].small,
                message=f"the training loop iterates `{name}`, {foreign[0]}, and draws its "
                "batches in a way the migration does not follow, so it cannot tell whether they "
                "would be sharded; migrate by hand",
            ))  # fmt: skip
            continue
        if bindings and all(foreign):
            plan.objects.remove(name)
            plan.notes.append(Finding(
                code="MIG905", level="note", node=bindings[0].small,
                message=f"`{name}` is {foreign[0]}, not a DataLoader: `accelerator.prepare` "
                "cannot shard it, so it is not prepared and each process draws everything it "
                "yields, as the same script under torchrun DDP would (each step then averages "
                "N batches, and what is computed from it counts every batch on every process); "
                "build a DataLoader to split the data",
            ))  # fmt: skip
            continue
        for binding in bindings:
            # only ever the program's own iterator (a wrap of a DataLoader is rewrapped_loaders')
            made = _own_iterable(context, binding)
            if made is not None and all(_own_iterable(context, b) for b in bindings):
                cls, line = made
                plan.objects.remove(name)
                plan.notes.append(Finding(
                    code="MIG905", level="note", node=binding.small,
                    message=f"`{name}` is a `{cls}` (the class at line {line}), not a "
                    "DataLoader: `accelerator.prepare` cannot shard it, so it is not prepared "
                    "and each process draws every batch it yields, as the same script under "
                    "torchrun DDP would (each step then averages N batches, and what is "
                    "computed from it counts every batch on every process); build a "
                    "DataLoader, or shard it by `accelerator.process_index`, to split the data",
                ))  # fmt: skip
                break
            made = _listed_by_helper(context, binding)
            if made is not None:
                function, line = made
                plan.objects.remove(name)
                plan.notes.append(Finding(
                    code="MIG905", level="note", node=binding.small,
                    message=f"`{name}` is a Python list of batches (built at line {line} in "
                    f"`{function}()`), not a DataLoader: `accelerator.prepare` cannot shard it, "
                    "so it is not prepared and each process trains on every batch, as the same "
                    "script under torchrun DDP would; build a DataLoader to shard the data",
                ))  # fmt: skip
                break


def _foreign_iterable(context: RuleContext, binding: Binding) -> str | None:
    """What a name bound to a known non-DataLoader iterable holds: a `range` of step numbers,
    a torchtext iterator (`BucketIterator.splits(...)` too)."""
    value = binding.value
    if not isinstance(value, ast.Call):
        return None
    qualified = context.facts.index.imports.qualify(value.func) or ""
    if qualified == "range" and not binding.unpacked:
        return "a `range` of numbers"
    if qualified.startswith("torchtext.") and "Iterator" in qualified:
        return f"a torchtext `{qualified.rsplit('.', 2)[-2] if qualified.endswith('.splits') else qualified.rsplit('.', 1)[-1]}`"
    return None


def _own_iterable(context: RuleContext, binding: Binding) -> tuple[str, int] | None:
    """`loader = GPULoader(x, y, 64)`: an instance of a class of this program that yields the
    batches itself (`__iter__`) and is no DataLoader: its name and line."""
    small = binding.small
    if binding.unpacked or not isinstance(small, ast.Assign):
        return None
    call = small.value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return None
    index = context.facts.index
    classes = [s for s in index.scopes if s.kind == "class" and s.name == call.func.id]
    if len(classes) != 1 or not isinstance(classes[0].node, ast.ClassDef):
        return None
    node = classes[0].node
    if node.bases or node.keywords:
        return None  # a DataLoader's subclass, or a base whose `__iter__` is not read here
    if not any(isinstance(n, ast.FunctionDef) and n.name == "__iter__" for n in node.body):
        return None
    return node.name, node.lineno


def _listed_by_helper(context: RuleContext, binding: Binding) -> tuple[str, int] | None:
    small = binding.small
    if not isinstance(small, ast.Assign) or not isinstance(small.value, ast.Call):
        return None
    function = context.facts.index.functions.get(patterns.name_of(small.value.func) or "")
    if function is None:
        return None
    target = small.targets[0]
    position = None
    if isinstance(target, ast.Tuple):
        names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        position = names.index(binding.name) if binding.name in names else None
        if position is None:
            return None
    for node in ast.walk(function.node):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if position is not None:
            if not isinstance(value, ast.Tuple) or len(value.elts) <= position:
                return None
            value = value.elts[position]
        if not isinstance(value, ast.Name):
            return None
        for made in function.assigns(value.id):
            if isinstance(made.value, (ast.List, ast.ListComp)) and made.small is not None:
                return function.name, made.small.lineno
        return None
    return None
