"""MIG006 prepare: one `a, b, c = accelerator.prepare(a, b, c)` after the last definition of the
prepared objects and before their first use, in the seeds' order (models, optimizers, loaders,
schedulers). Where it goes and what it holds is decided by the analysis (placement.py)."""

from __future__ import annotations

import ast
import re

from migrator.analysis.model.chains import chain_text, handed_in, received_chain, split_chain
from migrator.analysis.roles.public_entries import outside_entry_note
from migrator.analysis.syntax.index import Statement
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.global_batch import global_batch_note
from migrator.rules.loader_wrappers import rewrapped_loaders
from migrator.rules.sampling_loaders import sampling_loader_refusal

LINE_LENGTH = 88


class Prepare(Rule):
    code = "MIG006"
    name = "prepare"
    summary = "one accelerator.prepare(model, optimizer, loaders, scheduler) before first use"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        self.prepared: list[tuple[list, object]] = []  # what each prepare takes, and where
        if self._apply(context) is not False:
            note = global_batch_note(context, self.prepared)
            if note is not None:
                context.findings.append(note)

    def _apply(self, context: RuleContext) -> bool | None:
        """The prepares; False when the file is blocked after all."""
        plan = context.plan
        context.findings.extend(plan.notes)
        outside = outside_entry_note(context.facts, plan.prepares)
        if outside is not None:
            context.findings.append(outside)
        objects = plan.objects
        if plan.block is not None:
            sampling = sampling_loader_refusal(context, objects, plan.block.scope)
            if sampling is not None:
                context.block_file(sampling)
                return False
            rewraps = rewrapped_loaders(context, plan.block.scope, objects)
            refused = [r for r in rewraps if not r.same_block]
            if refused:
                context.block_file(refused[0].refusal(context))
                return False
            for rewrap in rewraps:  # the DataLoader is prepared on its own, then wrapped
                name, statement = rewrap.name, rewrap.wrap.statement
                self.prepared.append(([name], statement))
                code = f"{name} = {context.accelerator}.prepare({name})\n"
                context.edits.insert(
                    statement.block, statement.index, context.statement(code), priority=10
                )
                context.need_accelerator_before(
                    statement.block, statement.index, "accelerator.prepare(...)"
                )
            objects = [n for n in objects if not any(r.name == n for r in rewraps)]
        for name, block, index in plan.early:  # a loader a wrapper takes before the others exist
            self.prepared.append(([name], _statement_at(block, index)))
            code = f"{name} = {context.accelerator}.prepare({name})\n"
            context.edits.insert(block.holder, index, context.statement(code), priority=10)
            context.need_accelerator_before(block, index, "accelerator.prepare(...)")
        self._name_inline_loaders(context)
        self._prepare_held_loaders(context)
        for names, block, index in plan.homes:  # a class's objects made in another method
            self._insert(context, names, block, index)
            self.prepared.append((names, _statement_at(block, index)))
            self._hand_back(context, block.scope, names)
        for names, block, index in plan.branches:  # objects first met inside an `if`
            self._insert(context, names, block, index)
            self.prepared.append((names, _statement_at(block, index)))
        if plan.branches:
            branched = [n for names, _b, _i in plan.branches for n in names]
            self._hand_back(context, plan.block.scope, list(dict.fromkeys(branched)))
        for block, index in plan.waits:  # module code re-creating what a function trained
            code = f"{context.accelerator}.wait_for_everyone()\n"
            context.edits.insert(block.holder, index, context.statement(code), priority=10)
            context.need_accelerator_before(block, index, "accelerator.prepare(...)")
        if not objects or plan.block is None:
            return None
        self._insert(context, objects, plan.block, plan.index)
        self.prepared.append((objects, _statement_at(plan.block, plan.index)))
        for shared in context.facts.shared_epochs:
            if shared.train in plan.objects and shared.evaluated:
                context.findings.append(_shared_note(shared))
        for index in sorted({index for _name, _block, index in plan.reloaded}):
            # the re-created model loads what the main process saved: every process waits
            code = f"{context.accelerator}.wait_for_everyone()\n"
            context.edits.insert(plan.block.holder, index, context.statement(code), priority=10)
        self._hand_back(context, plan.block.scope, plan.objects)

    @staticmethod
    def _hand_back(context: RuleContext, owner, objects: list[str]) -> None:
        """A note on the parameters `owner` now prepares, and the objects on holders it
        receives (`cfg.model`); `return model` (`return G, D`) hands callers the plain model
        back."""
        received = [name for name in objects
                    if name in owner.params or received_chain(context.facts, owner, name)
                    or handed_in(owner, name)]  # fmt: skip
        if received:
            context.findings.append(_received_note(owner, received))
        if owner.kind != "function":
            return
        for node in _own_returns(owner.node):
            for value in _returned(node.value):
                name = value.id if isinstance(value, ast.Name) else chain_text(value)
                if name in context.facts.models and name in objects:  # `return cfg.model` too
                    context.unwrap(value)
                    statement = context.facts.index.statement_of_small(node)
                    if statement is not None:
                        context.need_accelerator_at(statement)

    @staticmethod
    def _insert(context: RuleContext, objects: list[str], block, index: int) -> None:
        """`a, b = accelerator.prepare(a, b)` before `block.statements[index]`."""
        names = ", ".join(objects)
        call = f"{context.accelerator}.prepare"
        indent = "    " * _depth(block)
        one_line = f"{names} = {call}({names})"
        if len(indent) + len(one_line) <= LINE_LENGTH:
            code = one_line + "\n"
        else:
            code = f"{names} = {call}(\n    {names}\n)\n"
        at_block_start = index == 0 and (block.parent is not None or block.scope.kind != "module")
        statement = context.statement(code, blank_line_before=not at_block_start)
        context.edits.insert(block.holder, index, statement, priority=10)
        context.need_accelerator_before(block, index, "accelerator.prepare(...)")

    def _prepare_held_loaders(self, context: RuleContext) -> None:
        """`{"train": DataLoader(...), ...}` -> `{"train": accelerator.prepare(DataLoader(...)),
        ...}`: a loader a container holds with no name of its own is prepared where the
        container is made (a dict comprehension's value, a helper's returned dict)."""
        for value, statement in context.facts.held_loaders:
            if _prepared_by(value, context):
                continue
            text = context.source.text_of(value)
            self.prepared.append(([value], statement))
            context.edits.replace_with(value, f"{context.accelerator}.prepare({text})")
            context.need_accelerator_before(
                statement.block, statement.index, "accelerator.prepare(...)"
            )

    def _name_inline_loaders(self, context: RuleContext) -> None:
        """`for b in enumerate(DataLoader(ds, ...)):` -> `train_loader = accelerator.prepare(
        DataLoader(ds, ...))` before the statement, and the loop iterates `train_loader`."""
        taken = {name for scope in context.facts.index.scopes
                 for name in [*scope.bindings, *scope.uses, *scope.params]}  # fmt: skip
        for call, statement in context.facts.inline_loaders:
            name = next(n for n in _loader_names() if n not in taken)
            taken.add(name)
            text = context.source.text_of(call)
            self.prepared.append(([call], statement))
            code = f"{name} = {context.accelerator}.prepare({text})\n"
            context.edits.insert(statement.block.holder, statement.index,
                                 context.statement(code), priority=10)  # fmt: skip
            context.edits.replace_with(call, name)
            context.need_accelerator_before(
                statement.block, statement.index, "accelerator.prepare(...)"
            )


def _statement_at(block, index: int) -> Statement:
    """The statement a prepare inserted before `block.statements[index]` goes before (the
    block's last one, for a prepare at its end)."""
    at = min(index, len(block.statements) - 1)
    return Statement(block.statements[at], block, at)


def _prepared_by(call: ast.expr, context: RuleContext) -> bool:
    """`accelerator.prepare(...)` already (the file was migrated before)."""
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "prepare"
        and chain_text(call.func.value) in {*context.facts.accelerator_names, context.accelerator}
    )


def _returned(value: ast.expr | None) -> list[ast.expr]:
    """What a `return` hands back one by one: `return G, D`, `return [G, D]`, `return
    {"gen": G}` hand back each model; `return model` the one."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return [item for element in value.elts for item in _returned(element)]
    if isinstance(value, ast.Dict):
        return [item for element in value.values for item in _returned(element)]
    return [] if value is None else [value]


def _own_returns(function: ast.AST) -> list[ast.Return]:
    """The `return` statements of `function` itself (not of functions defined inside it)."""
    found, stack = [], list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                   ast.ClassDef)):  # fmt: skip
            stack.extend(ast.iter_child_nodes(node))
    return found


def _received_note(function, names: list[str]) -> Finding:
    listed = ", ".join(f"`{name}`" for name in names)
    holders = sorted({_holder(name) for name in names if split_chain(name) is not None})
    held = (
        f"; the prepared objects replace them on {', '.join(f'`{h}`' for h in holders)}, "
        "the object the callers passed in"
        if holders
        else ""
    )
    method = function.parent is not None and function.parent.kind == "class"
    return Finding(
        code="MIG006",
        level="note",
        node=function.node,
        prepares_for=function.parent.name if method else function.name,
        message=(
            f"`{function.name}` now prepares {listed}, which its callers pass in: callers keep "
            "passing the plain objects (on our runtime a plain object prepared again comes "
            "back as the first prepare made it; HF Accelerate would wrap it again, so with "
            f"`--target accelerate` call it once or prepare in the caller){held}"
        ),
    )


def _shared_note(shared) -> Finding:
    evaluated = ", ".join(f"`{name}`" for name in shared.evaluated)
    function = shared.function.name
    return Finding(
        code="MIG006",
        level="note",
        node=shared.function.node,
        message=(
            f"`{function}()` trains on `{shared.train}` (prepared) and evaluates {evaluated} "
            f"through the same loop (its `{shared.param}` parameter): those stay plain, so every "
            "process evaluates the whole set and gets the same metrics (for a plateau "
            "scheduler, early stopping, the best checkpoint); the loop keeps moving their "
            "batches with its own `.to(...)`"
        ),
    )


def _holder(chain: str) -> str:
    """`self.cfg.train` for `self.cfg.train.model`: the object a chain's last field is on."""
    return re.sub(r"(\.\w+|\[[^\]]+\])$", "", chain)


def _loader_names():
    yield from ("train_loader", "train_dataloader", "loader")
    count = 1
    while True:
        yield f"train_loader_{count}"
        count += 1


def _depth(block) -> int:
    depth = len(block.parent.chain()) if block.parent is not None else 0
    scope = block.scope
    while scope.parent is not None:
        depth += 1
        scope = scope.parent
    return depth
