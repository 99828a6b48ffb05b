"""MIG022 gradient accumulation: the manual recipe

    loss = loss / k                      (or `loss /= k`, `(loss / k).backward()`)
    loss.backward()
    if (i + 1) % k == 0:                 (optionally `or` the end of the epoch)
        optimizer.step(); optimizer.zero_grad()

becomes `Accelerator(gradient_accumulation_steps=k)`, the loop body inside
`with accelerator.accumulate(model):`, the division removed (accelerator.backward divides:
keeping both would halve the gradient) and the condition `accelerator.sync_gradients`.
DDP's `no_sync()` variants (accumulation_patterns.py) become the same block: the
conditional `with model.no_sync() if ... else nullcontext():` is the accumulate block; the
`if`/`else` that writes the backward twice becomes one copy followed by the guarded step.
A conditional step without the division is not the same recipe: a finding, never a guess.
"""

from __future__ import annotations

import libcst as cst

from migrator.analysis.index import Loop, Statement
from migrator.findings import Finding
from migrator.rules.accumulation_patterns import (
    NoSyncBranches,
    code_of,
    conditional_no_sync,
    modulo_test,
    no_sync_branches,
    split_branches,
)
from migrator.rules.base import Rule, RuleContext


class Accumulation(Rule):
    code = "MIG022"
    name = "accumulation"
    summary = "manual loss/k + `if (i+1) % k == 0: step` -> accelerator.accumulate(model)"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        for loop in context.facts.training_loops:
            branches = _no_sync_branches(loop)
            if branches is not None:
                done = self._rewrite_branches(context, loop, branches)
            else:
                condition = _conditional_step(loop)
                if condition is None:
                    continue
                done = self._rewrite_condition(context, loop, *condition)
            if not done:
                return

    def _rewrite_condition(self, context: RuleContext, loop: Loop, if_node: cst.If, k) -> bool:
        """`if (i + 1) % k == 0:` holds the step; a `with model.no_sync() if ... else
        nullcontext():` around the backward, if any, becomes the accumulate block."""
        context_form = _no_sync_context(context, loop, k)
        model = context_form[1] if context_form is not None else self._model(context, loop)
        if not self._common(context, loop, if_node, k, model):
            return False
        context.edits.replace_with(if_node.test, context.accelerator_expr("sync_gradients"))
        accumulate = _accumulate_call(context, model)
        if context_form is not None:
            item, _, assignment = context_form
            context.edits.replace_with(item, accumulate)
            if assignment is not None:
                context.edits.remove(assignment)
            context.retire_imports_of({"contextlib.nullcontext"})
        else:
            context.edits.replace(loop.node, lambda updated: _wrap_body(updated, accumulate))
        return True

    def _rewrite_branches(self, context: RuleContext, loop: Loop, branches: NoSyncBranches):
        """`if accumulating: with model.no_sync(): A  else: A; step` ->
        `with accelerator.accumulate(model): A; if accelerator.sync_gradients: step`."""
        if not self._common(context, loop, branches.node, branches.k, branches.model):
            return False
        accumulate = _accumulate_call(context, branches.model)
        sync = context.accelerator_expr("sync_gradients")
        context.edits.replace(
            branches.node, lambda updated: _merge_branches(updated, branches, accumulate, sync)
        )
        return True

    def _common(self, context: RuleContext, loop: Loop, node: cst.If, k, model) -> bool:
        """Division removed and `gradient_accumulation_steps=k`, or a finding."""
        for call in loop.calls:
            inside = _inside(loop, call.statement)
            conditions = [s.node for s in inside if isinstance(s.node, cst.If)]
            if call.method == "zero_grad" and conditions and node not in conditions:
                context.block_file(
                    Finding(
                        code="MIG900",
                        node=call.node,
                        message=(
                            "gradients are cleared under a condition of their own (the start of the "
                            "accumulation window?); inside accelerator.accumulate zero_grad runs only "
                            "on sync steps: clear them right after the step, then migrate"
                        ),
                    )
                )
                return False
        divisions = _divisions(context, loop, k)
        if not divisions:
            context.block_file(
                Finding(
                    code="MIG900",
                    node=node,
                    message=(
                        "the optimizer steps every k batches but the loss is not divided by k; "
                        "accelerator.backward would divide it: migrate accumulation by hand"
                    ),
                )
            )
            return False
        portable = context.owner_expression(loop.scope, k)
        if portable is None or model is None:
            context.block_file(
                Finding(
                    code="MIG900",
                    node=node,
                    message=(
                        "gradient accumulation over values this function cannot see; migrate by hand"
                    ),
                )
            )
            return False
        code, depends = portable
        context.add_kwarg("gradient_accumulation_steps", code, depends)
        for division, kind in divisions:
            if kind == "statement":
                context.edits.remove(division)
            else:
                context.edits.replace(division, _left_operand)
        context.need_accelerator_at(loop.statement)
        return True

    @staticmethod
    def _model(context: RuleContext, loop: Loop) -> cst.BaseExpression | None:
        facts = context.facts
        name = context.local_name(loop.scope, facts.models[0]) if facts.models else None
        return cst.parse_expression(name) if name is not None else None


def _accumulate_call(context: RuleContext, model: cst.BaseExpression) -> cst.Call:
    model = model.deep_clone()
    return cst.Call(func=context.accelerator_expr("accumulate"), args=[cst.Arg(value=model)])


def _left_operand(updated: cst.CSTNode) -> cst.CSTNode:
    if isinstance(updated, cst.BinaryOperation):
        return (
            updated.left.with_changes(lpar=[], rpar=[])
            if not isinstance(updated.left, (cst.Tuple, cst.GeneratorExp))
            else updated.left
        )
    return updated


def _wrap_body(updated: cst.CSTNode, accumulate: cst.Call) -> cst.CSTNode:
    if not isinstance(updated, cst.For) or not isinstance(updated.body, cst.IndentedBlock):
        return updated
    inner = updated.body.with_changes(header=cst.TrailingWhitespace())
    wrapped = cst.With(items=[cst.WithItem(item=accumulate)], body=inner)
    return updated.with_changes(body=cst.IndentedBlock(body=[wrapped], header=updated.body.header))


def _merge_branches(updated: cst.CSTNode, branches: NoSyncBranches, accumulate, sync):
    """The rewritten `if`: both branches were edited alike, so the no_sync body's length is
    where the syncing branch's step begins."""
    split = split_branches(updated, branches.steps_when_true) if isinstance(
        updated, cst.If) else None  # fmt: skip
    if split is None:
        return updated
    repeated, syncing = len(split[0].body.body), split[1]
    step = cst.If(test=sync, body=cst.IndentedBlock(body=syncing[repeated:]))
    body = cst.IndentedBlock(body=[*syncing[:repeated], step])
    return cst.With(items=[cst.WithItem(item=accumulate)], body=body,
                    leading_lines=updated.leading_lines)  # fmt: skip


def _inside(loop: Loop, statement: Statement) -> list[Statement]:
    """The statements enclosing `statement` within `loop`'s body, outermost first."""
    chain = statement.chain()
    return chain[chain.index(loop.statement) + 1 :] if loop.statement in chain else []


def _step_conditions(loop: Loop):
    """The `if` statements of `loop` enclosing its optimizer steps, outermost first per step."""
    for call in loop.calls:
        if call.method == "step" and call.loop is loop:
            for statement in _inside(loop, call.statement):
                if isinstance(statement.node, cst.If):
                    yield statement.node


def _conditional_step(loop: Loop) -> tuple[cst.If, cst.BaseExpression] | None:
    """The `if (i + 1) % k == 0:` that holds the optimizer step, and k."""
    for node in _step_conditions(loop):
        found = modulo_test(node.test)
        if found is not None and found[1]:
            return node, found[0]
    return None


def _no_sync_branches(loop: Loop) -> NoSyncBranches | None:
    found = (no_sync_branches(node) for node in _step_conditions(loop))
    return next((branches for branches in found if branches is not None), None)


def _no_sync_context(context: RuleContext, loop: Loop, k):
    """(with item, model, assignment to drop or None) for the backward's enclosing
    `with model.no_sync() if ... else nullcontext():` (or `with ctx():` / `with ctx:` over
    `ctx = ...` bound in the loop) whose k is the step condition's k."""
    imports = context.facts.index.imports
    for site in context.facts.backward_calls:
        if not loop.contains(site.loop):
            continue
        for statement in _inside(loop, site.statement):
            node = statement.node
            if not isinstance(node, cst.With) or len(node.items) != 1:
                continue
            item = node.items[0].item
            found = conditional_no_sync(item, imports)
            assignment = None
            if found is None:
                found, assignment = _bound_no_sync(context, loop, item)
            if found is not None and code_of(found[1]) == code_of(k):
                return item, found[0], assignment
    return None


def _bound_no_sync(context: RuleContext, loop: Loop, item: cst.BaseExpression):
    """`with ctx():` over `ctx = model.no_sync if ... else nullcontext` (or `with ctx:` over
    the called forms), `ctx` bound once, in this loop, and used nowhere else."""
    called = not (isinstance(item, cst.Call) and not item.args)
    name = item if called else item.func
    if not isinstance(name, cst.Name):
        return None, None
    bindings = loop.scope.bindings.get(name.value, [])
    uses = loop.scope.uses.get(name.value, [])
    if len(bindings) != 1 or len(uses) != 1 or bindings[0].kind != "assign":
        return None, None
    binding = bindings[0]
    if binding.loop is not loop or binding.unpacked or not isinstance(binding.small, cst.Assign):
        return None, None
    found = conditional_no_sync(binding.value, context.facts.index.imports, called)
    return (found, binding.small) if found is not None else (None, None)


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
    wanted = code_of(k)
    receivers = {}
    for site in context.facts.backward_calls:
        if loop.contains(site.loop) and site.receiver is not None:
            receiver = _unscaled(site.receiver)
            receivers[code_of(receiver)] = (site, receiver)
    found = []
    for code, (site, receiver) in receivers.items():
        if isinstance(receiver, cst.BinaryOperation) and isinstance(receiver.operator, cst.Divide):
            if code_of(receiver.right) == wanted:
                found.append((receiver, "expression"))
            continue
        for binding in site.scope.bindings.get(code, []):
            if not loop.contains(binding.loop) or binding.small is None:
                continue
            small = binding.small
            if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.DivideAssign):
                if code_of(small.value) == wanted:
                    found.append((small, "statement"))
            elif isinstance(small, cst.Assign) and isinstance(small.value, cst.BinaryOperation):
                value = small.value
                if isinstance(value.operator, cst.Divide) and code_of(value.right) == wanted:
                    if code_of(value.left) == code:
                        found.append((small, "statement"))
                    else:
                        found.append((value, "expression"))
    return found
