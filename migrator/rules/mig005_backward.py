"""MIG005 backward: `<expr>.backward(*args)` -> `accelerator.backward(<expr>, *args)` in training
code (the loops over prepared loaders and the helpers they call)."""

from __future__ import annotations

import ast

from migrator.arglists import Item, call_items
from migrator.rules.base import Rule, RuleContext

TENSOR_BACKWARD = ("gradient", "retain_graph", "create_graph", "inputs")  # its positional order


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
        for position, (item, argument) in enumerate(zip(items.items, call.args, strict=False)):
            # `accelerator.backward(loss, **kwargs)` takes no positional argument after the
            # loss: `errD.backward(mone)` passes Tensor.backward's `gradient` by its name
            if not isinstance(argument, ast.Starred) and position < len(TENSOR_BACKWARD):
                item.text = f"{TENSOR_BACKWARD[position]}={item.text}"
        items.items = [Item(renderer.text_of(receiver, parens=keep_parens), None), *items.items]
        return items.render()

    return render
