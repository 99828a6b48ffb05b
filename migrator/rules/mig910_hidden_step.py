"""MIG910 hidden training step: this file builds the loader and the optimizer, but the
backward runs in a function of another module, which this file cannot see or rewrite:

    from engine import train_one_epoch                     # DETR / DeiT / MAE style drivers
    train_one_epoch(model, criterion, loader, optimizer, device, epoch)

    for x, y in loader:                                    # the step is here, the backward
        loss = losses.compute_and_backward(model, x, y)    # is there
        optimizer.step()

Reported, never rewritten (a prepare here without accelerator.backward there would be half a
migration); only where no training loop is visible, and never in a file that already has an
Accelerator."""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import bindings_of, value_call
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import CallSite, Scope
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext

OPTIMIZER_FACTORY = re.compile(r"(create|build|make|get)_optimi[sz]er")


class HiddenStep(Rule):
    code = "MIG910"
    name = "hidden-step"
    summary = "report a training step whose backward runs in another module (finding)"
    triggers = ("DataLoader",)  # the loader it hands over is built here
    detector = True

    def apply(self, context: RuleContext) -> None:
        facts = context.facts
        if facts.training_loops or facts.accelerator_names:
            return
        index = facts.index
        has_backward = any(site.method == "backward" for site in index.calls())
        for site in index.calls():
            callee = _foreign_callee(site, facts)
            if callee is None:
                continue
            roles = {_built_by(facts, site.scope, patterns.name_of(arg.value))
                     for arg in patterns.call_args(site.node)}  # fmt: skip
            if {"optimizer", "loader"} <= roles:
                self._report(context, site.node, (
                    f"`{callee}` from another module receives this file's optimizer and loader: "
                    "the training step runs there, out of sight; migrate both files by hand "
                    "(prepare here, accelerator.backward there)"))  # fmt: skip
        if has_backward:
            return
        for scope in index.scopes:
            for loop in scope.loops:
                self._loop_without_backward(context, scope, loop)

    def _loop_without_backward(self, context: RuleContext, scope: Scope, loop) -> None:
        facts = context.facts
        loader, _ = patterns.loader_base(loop.iter, facts.index.imports)
        if loader is None or _built_by(facts, scope, loader) != "loader":
            return
        calls = loop.calls
        steps = [
            c
            for c in calls
            if c.method == "step"
            and _built_by(facts, scope, patterns.name_of(c.receiver)) == "optimizer"
        ]
        helpers = [name for name in (_foreign_callee(c, facts) for c in calls) if name]
        if steps and helpers:
            self._report(context, steps[0].node, (
                f"the optimizer steps in a loop over `{loader}` but no backward is in this file: "
                f"the gradients come from `{helpers[0]}` in another module; migrate both files by "
                "hand (accelerator.backward there)"))  # fmt: skip

    def _report(self, context: RuleContext, node: ast.AST, message: str) -> None:
        context.findings.append(Finding(code=self.code, message=message, node=node))


def _foreign_callee(site: CallSite, facts: TrainingFacts) -> str | None:
    """The name of a function imported from another module (absolute or relative), not torch."""
    dotted = dotted_name(site.node.func)
    if dotted is None:
        return None
    imports = facts.index.imports
    head, _, rest = dotted.partition(".")
    if head in imports.relative:
        return imports.relative[head] + (f".{rest}" if rest else "")
    if not imports.imported(head):
        return None
    qualified = imports.qualify(site.node.func) or dotted
    return None if qualified.split(".")[0] == "torch" else qualified


def _built_by(facts: TrainingFacts, scope: Scope, name: str | None) -> str | None:
    """ "optimizer" / "loader" when `name`, seen from `scope`, is an object this file builds as
    one."""
    if name is None:
        return None
    imports = facts.index.imports
    for binding in bindings_of(facts.origin(scope, name)):
        call = value_call(binding)
        if call is None:
            continue
        if patterns.is_loader_call(call, imports):
            return "loader"
        if patterns.is_optimizer_call(call, imports) and not patterns.is_scheduler_call(
            call, imports
        ):
            return "optimizer"
        if _optimizer_factory(call, imports):
            return "optimizer"
    return None


def _optimizer_factory(call: ast.Call, imports) -> bool:
    """`create_optimizer(args, model)` (timm, ConvNeXt, BEiT), `build_optimizer(cfg, model)`:
    a function named for making an optimizer, here only to say that the step hides elsewhere."""
    name = patterns.last_part(imports.qualify(call.func) or dotted_name(call.func) or "")
    return bool(OPTIMIZER_FACTORY.fullmatch(name)) and not patterns.is_scheduler_call(call, imports)
