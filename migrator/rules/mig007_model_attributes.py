"""MIG007 model attributes: a prepared model is wrapped in DistributedDataParallel, which answers
the nn.Module API (`parameters()`, `train()`, `state_dict()`, calling it) but not the model's
own attributes and methods (`model.weight`, `model.config`, `model.generate(...)`). Those go
through `accelerator.unwrap_model(model)`, on every target (HF Accelerate fails the same way).
`model.no_sync()` exists only on DDP: it becomes `accelerator.no_sync(model)`.

`state_dict()` / `load_state_dict()` go through `unwrap_model` too: DDP's keys carry a
`module.` prefix, so a checkpoint saved unwrapped (MIG030, accelerator.save) loads only into the
unwrapped model, and a state copied from the wrapper would not load into a plain model.
"""

from __future__ import annotations

from migrator.analysis.patterns import MODULE_API
from migrator.rules.base import Rule, RuleContext


class ModelAttributes(Rule):
    code = "MIG007"
    name = "model-attributes"
    summary = "model.<own attribute> -> accelerator.unwrap_model(model).<attribute> after prepare"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        for scope in context.facts.training_scopes:
            for name, uses in scope.uses.items():
                if context.prepared_role(scope, name) != "model":
                    continue
                for use in uses:
                    if use.kind != "attr" or use.attr in MODULE_API:
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
