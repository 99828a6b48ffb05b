"""MIG005 backward: `<expr>.backward(*args)` -> `accelerator.backward(<expr>, *args)` in training
code (the loops over prepared loaders and the helpers they call)."""

from __future__ import annotations

import libcst as cst

from migrator.rules.base import Rule, RuleContext


class Backward(Rule):
    code = "MIG005"
    name = "backward"
    summary = "loss.backward() -> accelerator.backward(loss) (scaling, accumulation, sync)"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        for site in context.facts.backward_calls:
            context.edits.replace(site.node, self._rewriter(context))
            context.need_accelerator_at(site.statement)

    @staticmethod
    def _rewriter(context: RuleContext):
        method = context.accelerator_expr("backward")

        def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
            if not isinstance(updated, cst.Call) or not isinstance(updated.func, cst.Attribute):
                return updated
            receiver = updated.func.value
            if not isinstance(receiver, (cst.Tuple, cst.GeneratorExp)):
                receiver = receiver.with_changes(lpar=[], rpar=[])
            first = cst.Arg(value=receiver)
            rest = list(updated.args)
            return updated.with_changes(func=method, args=[first, *rest])

        return rewrite
