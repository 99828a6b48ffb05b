"""MIG022 gradient accumulation: the manual recipe

    loss = loss / k                      (or `loss /= k`, `(loss / k).backward()`)
    loss.backward()
    if (i + 1) % k == 0:                 (optionally `or` the end of the epoch)
        optimizer.step(); optimizer.zero_grad()

becomes `Accelerator(gradient_accumulation_steps=k)`, the loop body inside
`with accelerator.accumulate(model):`, the division removed (accelerator.backward divides:
keeping both would halve the gradient) and the condition `accelerator.sync_gradients`.
A conditional step without the division is not the same recipe: a finding, never a guess.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from migrator.analysis.index import Loop
from migrator.edits import CODEGEN
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext


def _code(node: cst.CSTNode) -> str:
    return "".join(CODEGEN.code_for_node(node).split())


class Accumulation(Rule):
    code = "MIG022"
    name = "accumulation"
    summary = "manual loss/k + `if (i+1) % k == 0: step` -> accelerator.accumulate(model)"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        for loop in context.facts.training_loops:
            condition = _conditional_step(loop)
            if condition is None:
                continue
            if_node, k = condition
            if not self._rewrite(context, loop, if_node, k):
                return

    def _rewrite(self, context: RuleContext, loop: Loop, if_node: cst.If, k) -> bool:
        facts = context.facts
        divisions = _divisions(context, loop, k)
        if not divisions:
            context.block_file(Finding(code="MIG900", node=if_node, message=(
                "the optimizer steps every k batches but the loss is not divided by k; "
                "accelerator.backward would divide it: migrate accumulation by hand")))
            return False
        portable = context.owner_expression(loop.scope, k)
        model = context.local_name(loop.scope, facts.models[0]) if facts.models else None
        if portable is None or model is None:
            context.block_file(Finding(code="MIG900", node=if_node, message=(
                "gradient accumulation over values this function cannot see; migrate by hand")))
            return False
        code, depends = portable
        context.add_kwarg("gradient_accumulation_steps", code, depends)
        for node, kind in divisions:
            if kind == "statement":
                context.edits.remove(node)
            else:
                context.edits.replace(node, _left_operand)
        sync = context.accelerator_expr("sync_gradients")
        context.edits.replace_with(if_node.test, sync)
        accumulate = context.accelerator_expr("accumulate")
        context.edits.replace(loop.node, lambda updated: _wrap_body(updated, accumulate, model))
        context.need_accelerator_at(loop.statement)
        return True


def _left_operand(updated: cst.CSTNode) -> cst.CSTNode:
    if isinstance(updated, cst.BinaryOperation):
        return updated.left.with_changes(lpar=[], rpar=[]) if not isinstance(
            updated.left, (cst.Tuple, cst.GeneratorExp)
        ) else updated.left
    return updated


def _wrap_body(updated: cst.CSTNode, accumulate: cst.BaseExpression, model: str) -> cst.CSTNode:
    if not isinstance(updated, cst.For) or not isinstance(updated.body, cst.IndentedBlock):
        return updated
    item = cst.WithItem(item=cst.Call(func=accumulate, args=[cst.Arg(value=cst.Name(model))]))
    inner = updated.body.with_changes(header=cst.TrailingWhitespace())
    wrapped = cst.With(items=[item], body=inner)
    return updated.with_changes(body=cst.IndentedBlock(body=[wrapped], header=updated.body.header))


def _conditional_step(loop: Loop) -> Optional[tuple[cst.If, cst.BaseExpression]]:
    """The `if (i + 1) % k == 0:` that holds the optimizer step, and k."""
    for call in loop.calls:
        if call.method != "step" or call.loop is not loop:
            continue
        chain = call.statement.chain()
        inside = chain[chain.index(loop.statement) + 1:] if loop.statement in chain else []
        for statement in inside:
            if isinstance(statement.node, cst.If):
                k = _modulo_divisor(statement.node.test)
                if k is not None:
                    return statement.node, k
    return None


def _modulo_divisor(test: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _modulo_divisor(test.left) or _modulo_divisor(test.right)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal) or _code(target.comparator) != "0":
        return None
    left = test.left
    if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo):
        counter = left.left
        if isinstance(counter, cst.BinaryOperation) and isinstance(counter.operator, cst.Add):
            if _code(counter.right) == "1":
                return left.right
    return None


def _unscaled(receiver: cst.BaseExpression) -> cst.BaseExpression:
    """`scaler.scale(loss)` -> `loss`: the GradScaler goes (MIG020); the loss is what counts."""
    if (
        isinstance(receiver, cst.Call)
        and isinstance(receiver.func, cst.Attribute)
        and receiver.func.attr.value == "scale"
        and len(receiver.args) == 1
    ):
        return receiver.args[0].value
    return receiver


def _divisions(context: RuleContext, loop: Loop, k: cst.BaseExpression):
    """[(node, "statement" | "expression")] dividing the backward's loss by k."""
    wanted = _code(k)
    receivers = {}
    for site in context.facts.backward_calls:
        if loop.contains(site.loop) and site.receiver is not None:
            receiver = _unscaled(site.receiver)
            receivers[_code(receiver)] = (site, receiver)
    found = []
    for code, (site, receiver) in receivers.items():
        if isinstance(receiver, cst.BinaryOperation) and isinstance(receiver.operator, cst.Divide):
            if _code(receiver.right) == wanted:
                found.append((receiver, "expression"))
            continue
        for binding in site.scope.bindings.get(code, []):
            if not loop.contains(binding.loop) or binding.small is None:
                continue
            small = binding.small
            if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.DivideAssign):
                if _code(small.value) == wanted:
                    found.append((small, "statement"))
            elif isinstance(small, cst.Assign) and isinstance(small.value, cst.BinaryOperation):
                value = small.value
                if isinstance(value.operator, cst.Divide) and _code(value.right) == wanted:
                    if _code(value.left) == code:
                        found.append((small, "statement"))
                    else:
                        found.append((value, "expression"))
    return found
