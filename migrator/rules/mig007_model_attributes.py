"""MIG007 model attributes: a prepared model is wrapped in DistributedDataParallel, which answers
the nn.Module API (`parameters()`, `train()`, `state_dict()`, calling it) but not the model's
own attributes and methods (`model.weight`, `model.config`, `model.generate(...)`). Those go
through `accelerator.unwrap_model(model)`, on every target (HF Accelerate fails the same way).
`model.no_sync()` exists only on DDP: it becomes `accelerator.no_sync(model)`.

`state_dict()` / `load_state_dict()` go through `unwrap_model` too: DDP's keys carry a
`module.` prefix, so a checkpoint saved unwrapped (MIG030, accelerator.save) loads only into the
unwrapped model, and a state copied from the wrapper would not load into a plain model. In a
function that reads the unwrapped `state_dict()`, `named_parameters()` (and the other `named_*`)
are unwrapped too, so names from both still match (a FedProx term looking parameters up by
their state-dict keys).

Functions of this file that the training functions call with the prepared model (a
`validation_step(model, batch)` beside `training_step`) get the same treatment.
"""

from __future__ import annotations

import ast

from migrator.rules.base import Rule, RuleContext

# What a DistributedDataParallel wrapper answers itself (nn.Module's API), plus `module`,
# which MIG010 rewrites on its own.
MODULE_API = {
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "train", "eval", "training",
    "zero_grad", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "apply",
    "requires_grad_", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "register_buffer", "register_parameter", "add_module",
    "forward", "type", "share_memory", "get_submodule", "get_parameter", "get_buffer",
    "module", "compile", "__class__",
}  # fmt: skip
NAMED = {"named_parameters", "named_buffers", "named_children", "named_modules"}


class ModelAttributes(Rule):
    code = "MIG007"
    name = "model-attributes"
    summary = "model.<own attribute> -> accelerator.unwrap_model(model).<attribute> after prepare"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        for scope in _scopes_with_prepared_model(context):
            for name, uses in scope.uses.items():
                if context.prepared_role(scope, name) != "model":
                    continue
                keyed = any(use.kind == "attr" and use.attr == "state_dict" for use in uses)
                for use in uses:
                    if use.kind != "attr" or (
                        use.attr in MODULE_API and not (keyed and use.attr in NAMED)
                    ):
                        continue
                    if context.plan.reloaded_at(name, use.statement):
                        continue  # a model re-created after training is a plain model
                    if scope is context.facts.owner and context.plan.before_prepare(use.statement):
                        continue  # set-up before prepare (a checkpoint loaded): the plain model
                    if use.attr == "no_sync" and use.call is not None and not use.call.args:
                        # Only DDP has no_sync(); accelerator.no_sync works on 1 process too.
                        no_sync = f"{context.accelerator_expr('no_sync')}({context.source.text_of(use.node)})"
                        context.edits.replace(use.call, lambda _t, _r, n=no_sync: n)
                        context.need_accelerator_at(use.statement)
                        continue
                    context.unwrap(use.node)
                    context.need_accelerator_at(use.statement, soft=use.node)


def _scopes_with_prepared_model(context: RuleContext) -> list:
    """The training scopes, and the functions of this file they (or those functions) call
    with the prepared model as an argument, after it is prepared."""
    scopes = list(context.facts.training_scopes)
    functions = context.facts.index.functions
    for scope in scopes:  # grows while it is walked
        for site in scope.calls:
            callee = functions.get(site.callee or "")
            if callee is None or callee in scopes:
                continue
            if scope is context.facts.owner and context.plan.before_prepare(site.statement):
                continue  # set-up on the plain model (`init_weights(model)`)
            if any(
                isinstance(arg, ast.Name) and context.prepared_role(scope, arg.id) == "model"
                for arg in [*site.node.args, *(k.value for k in site.node.keywords)]
            ):
                scopes.append(callee)
    return scopes
