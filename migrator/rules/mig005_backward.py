"""MIG005 backward: `<expr>.backward(*args)` -> `accelerator.backward(<expr>, *args)` in training
code (the loops over prepared loaders and the helpers they call)."""

from __future__ import annotations

import ast

from migrator.arglists import Item, call_items
from migrator.rules.base import Rule, RuleContext


class Backward(Rule):
    code = "MIG005"
    name = "backward"
    summary = "loss.backward() -> accelerator.backward(loss) (scaling, accumulation, sync)"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        for site in context.facts.backward_calls:
            method = context.accelerator_expr("backward")
            context.edits.rewrite(site.node, backward_render(site.node, method))
            context.need_accelerator_at(site.statement)


def backward_render(call: ast.Call, method: str):
    """A render function: `<expr>.backward(*args)` -> `<method>(<expr>, *args)`; also used
    on code already on Accelerate (analysis/on_target.py) to complete a half-migrated step."""

    def render(_text: str, renderer) -> str:
        receiver = call.func.value
        keep_parens = isinstance(receiver, (ast.Tuple, ast.GeneratorExp))
        items = call_items(renderer, call, func_text=method)
        items.items = [Item(renderer.text_of(receiver, parens=keep_parens), None), *items.items]
        return items.render()

    return render
