"""MIG021 clipping: `torch.nn.utils.clip_grad_norm_/clip_grad_value_(...)` in any import form ->
`accelerator.clip_grad_norm_/clip_grad_value_(...)`, which unscales fp16 gradients first."""

from __future__ import annotations

from migrator.analysis.catalogue import patterns
from migrator.rules.base import Rule, RuleContext


class Clipping(Rule):
    code = "MIG021"
    name = "clipping"
    summary = "torch.nn.utils.clip_grad_norm_/value_ -> accelerator.clip_grad_norm_/value_"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        imports = context.facts.index.imports
        rewritten: set[str] = set()
        for scope in context.facts.training_scopes:
            for site in scope.calls:
                qualified = imports.qualify(site.node.func) or ""
                method = patterns.CLIP_FUNCTIONS.get(qualified)
                if method is None:
                    continue
                rewritten.add(qualified)
                replacement = context.accelerator_expr(method)
                context.edits.replace_with(site.node.func, replacement)
                context.need_accelerator_at(site.statement)
        context.retire_imports_of(rewritten)
