"""MIG007 at the call: a prepared model handed to code that does not train it gets
`accelerator.unwrap_model(model)`.

`save_checkpoint(model, path)`, `utils.load_checkpoint(path, model, optimizer)` after the
prepare, `visualize_latent_space(config, model, loader)`, `test(model, loader)`: the helper
saves the model (DDP's keys carry `module.`, DDP has no `save_pretrained`), loads a plain
checkpoint into it, reads its own attributes (`model.latent_dim`: AttributeError on the
wrapper) or evaluates it. What the helper does is read from its body where the program has it
(a module of the program that is not joined: the analysis's helper library), else from its
name (analysis/model/hand_offs.py); a helper that trains (`train_epoch(model, loader,
optimizer)`) keeps the wrapper, and one whose role cannot be told gets a note. Helpers of
this module (or of the joined program) that the training code calls are unwrapped inside,
where they read the model (mig007_model_attributes.py); the others (a method of another
class, `self.reporter.describe(self.model)`, which sees no accelerator) are read here.
"""

from __future__ import annotations

import ast

from migrator.analysis.effects.processes import DEAD
from migrator.analysis.model.chains import chain_text
from migrator.analysis.model.hand_offs import (
    EVALUATES,
    LIBRARY_ROLES,
    TRAINS,
    UNWRAPPED,
    BodyReader,
    foreign_callee,
    is_library,
    name_role,
)
from migrator.analysis.model.origins import is_method
from migrator.analysis.syntax.views import name_of
from migrator.findings import Finding
from migrator.rules.base import RuleContext


def hand_models_on(context: RuleContext, inside: list) -> None:
    """Register the unwraps (module docstring) for every call handing a prepared model on;
    `inside`: the functions MIG007 unwraps the model in, where they read it."""
    facts = context.facts
    processes = context.processes
    noted: set[str] = set()
    for scope in facts.index.scopes:
        if processes.scope_status(scope) == DEAD:
            continue
        for site in scope.calls:
            handed = _handed_models(context, scope, site)
            if not handed:
                continue
            found = _callee_role(context, site, inside)
            if found is None:
                continue
            role, callee, seen = found
            if role is None and _hands_optimizer(context, scope, site):
                role = TRAINS  # `fit(model, loader, optimizer)`: it steps the model
            if role in (None, EVALUATES) and _in_training_loop(context, site):
                role = TRAINS  # `loss = score_fn(model, x)` before the backward: its forward
            if role in UNWRAPPED:
                for node in handed:
                    context.unwrap(node)
                    context.need_accelerator_at(site.statement, soft=node)
            elif role is None and not seen and callee not in noted:
                noted.add(callee)
                context.findings.append(_unknown_note(context, site, callee, handed[0]))


def _handed_models(context: RuleContext, scope, site) -> list[ast.expr]:
    """The arguments of the call that name a prepared model, where it is prepared already."""
    found = []
    for argument in [*site.node.args, *(k.value for k in site.node.keywords)]:
        name = name_of(argument) or chain_text(argument)
        if name is None or context.prepared_role(scope, name) != "model":
            continue
        if context.plan.reloaded_at(name, site.statement):
            continue  # a model made again after training is a plain model
        home = context.facts.homes.get(name, context.facts.owner)
        if scope in (context.facts.owner, home) and context.plan.before_prepare(
            site.statement, name
        ):
            continue  # set-up on the plain model (`load_checkpoint(path, model)` before it)
        found.append(argument)
    return found


def _callee_role(context: RuleContext, site, inside: list):
    """(role or None, the callee's name, whether its body was read) for a helper this rule
    decides, or None when the call is not one: a function of this module (unwrapped inside),
    a method of an object, a library call."""
    facts = context.facts
    imports = facts.index.imports
    target = context.processes.graph.callee(site)
    if target is not None:  # the program's own: unwrapped inside, or read here
        if target in inside or target.node is None:
            return None
        functions = {name: f.node for name, f in facts.index.functions.items() if f.node}
        reader = BodyReader(functions, imports)
        params = _params_for(target.node, site.node, context, site.scope, is_method(target))
        roles = {reader.role(target.node, param) for param in params}
        role = TRAINS if TRAINS in roles else next((r for r in roles if r), None)
        return role, target.name, True
    qualified = imports.qualify(site.node.func)
    callee = foreign_callee(site.node, imports)
    found = context.library.called(site.node, imports, callee)
    if found is not None:
        module, function = found
        reader = BodyReader(module.functions, module.imports)
        params = _params_for(function, site.node, context, site.scope)
        roles = {reader.role(function, param) for param in params}
        role = TRAINS if TRAINS in roles else next((r for r in roles if r), None)
        return role, callee or qualified, True
    if qualified in LIBRARY_ROLES:
        return LIBRARY_ROLES[qualified], qualified, True
    if callee is None or is_library(callee):
        return None
    return name_role(callee), callee, False


def _params_for(function, call: ast.Call, context: RuleContext, scope, method=False) -> list[str]:
    """The parameters of a helper's `def` that the call fills with a prepared model."""
    params = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    params = params[1:] if method else params  # `self` is not passed
    found = []
    for position, argument in enumerate(call.args):
        name = name_of(argument) or chain_text(argument)
        if name and context.prepared_role(scope, name) == "model" and position < len(params):
            found.append(params[position])
    for keyword in call.keywords:
        name = name_of(keyword.value) or chain_text(keyword.value)
        if keyword.arg and name and context.prepared_role(scope, name) == "model":
            found.append(keyword.arg)
    return found


def _in_training_loop(context: RuleContext, site) -> bool:
    """Does the call run in a training loop with gradients on (its forward may be the one
    the backward goes through, which must be the wrapper's)?"""
    loops = context.facts.training_loops
    if not any(loop.scope is site.scope and loop.contains(site.loop) for loop in loops):
        return False
    return not any(
        isinstance(s.node, ast.With)
        and any(
            word in context.source.text_of(i.context_expr)
            for i in s.node.items
            for word in ("no_grad", "inference_mode")
        )
        for s in site.statement.chain()
    )


def _hands_optimizer(context: RuleContext, scope, site) -> bool:
    return any(
        context.role(scope, name) == "optimizer"
        for argument in [*site.node.args, *(k.value for k in site.node.keywords)]
        if (name := name_of(argument) or chain_text(argument)) is not None
    )


def _unknown_note(context: RuleContext, site, callee: str, model: ast.expr) -> Finding:
    text = context.source.text_of(model)
    return Finding(code="MIG007", level="note", node=site.node, message=(
        f"`{callee}(...)` (line {site.node.lineno}) is handed the prepared `{text}`, which is "
        "wrapped in DistributedDataParallel; what it does with it cannot be seen here: if it "
        f"saves it, loads into it, reads its attributes or only evaluates it, pass "
        f"`{context.accelerator_expr('unwrap_model')}({text})` instead"))  # fmt: skip
