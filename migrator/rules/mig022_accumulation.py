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

import ast

from migrator.analysis.catalogue.patterns import root_name
from migrator.analysis.syntax.index import Loop, Statement
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
from migrator.rules.divided_losses import keep_divided_reads
from migrator.rules.mig004_batch_placement import drop_guards_if_emptied


class Accumulation(Rule):
    code = "MIG022"
    name = "accumulation"
    summary = "manual loss/k + `if (i+1) % k == 0: step` -> accelerator.accumulate(model)"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        for loop in context.facts.training_loops:
            branches = _no_sync_branches(context, loop)
            if branches is not None:
                done = self._rewrite_branches(context, loop, branches)
            else:
                condition = _conditional_step(context, loop)
                if condition is None:
                    continue
                done = self._rewrite_condition(context, loop, *condition)
            if not done:
                return

    def _rewrite_condition(self, context: RuleContext, loop: Loop, if_node: ast.If, k) -> bool:
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
            block = context.facts.index.block(loop.node)
            if block is not None and block.kind == "body":
                context.edits.replace(loop.node, _wrap_body(loop.node, block, accumulate))
        return True

    def _rewrite_branches(self, context: RuleContext, loop: Loop, branches: NoSyncBranches):
        """`if accumulating: with model.no_sync(): A  else: A; step` ->
        `with accelerator.accumulate(model): A; if accelerator.sync_gradients: step`."""
        if not self._common(context, loop, branches.node, branches.k, branches.model):
            return False
        accumulate = _accumulate_call(context, branches.model)
        sync = context.accelerator_expr("sync_gradients")
        context.edits.replace(branches.node, _merge_branches(context, branches, accumulate, sync))
        return True

    def _common(self, context: RuleContext, loop: Loop, node: ast.If, k, model) -> bool:
        """Division removed and `gradient_accumulation_steps=k`, or a finding."""
        for call in loop.calls:
            inside = _inside(loop, call.statement)
            conditions = [s.node for s in inside if isinstance(s.node, ast.If)]
            if call.method == "zero_grad" and conditions and not any(c is node for c in conditions):
                context.block_file(
                    Finding(
                        code="MIG900",
                        node=call.node,
                        message=(
                            f"gradients are cleared at line {call.node.lineno} under a condition "
                            f"of their own (the `if` at line {conditions[-1].lineno}, not the "
                            f"step's at line {node.lineno}: the start of the accumulation "
                            "window?); inside accelerator.accumulate zero_grad runs only on sync "
                            "steps: clear them right after the step, then migrate"
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
                        f"the optimizer steps every `{code_of(context.source, k)}` batches (the "
                        f"`if` at line {node.lineno}) but the loss of {_backward_lines(context, loop)} "
                        "is not divided by it; accelerator.backward would divide it: migrate "
                        "accumulation by hand"
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
                        f"the optimizer steps every `{code_of(context.source, k)}` batches (the "
                        f"`if` at line {node.lineno}), but "
                        + (
                            "no model of the loop at line "
                            f"{loop.node.lineno} is prepared to accumulate over"
                            if model is None
                            else f"`{code_of(context.source, k)}`{_set_where(loop, k)} is not a "
                            "value the code that makes the Accelerator can read "
                            "(gradient_accumulation_steps= is fixed when it is made)"
                        )
                        + "; migrate by hand"
                    ),
                )
            )
            return False
        code, depends = portable
        context.add_kwarg("gradient_accumulation_steps", code, depends)
        for division, kind in divisions:
            if kind == "statement":
                keep_divided_reads(context, loop, division, code_of(context.source, k))
                context.edits.remove(division)
                statement = context.facts.index.statement_of_small(division)
                if statement is not None:  # `if steps > 1:` holding only the division goes too
                    drop_guards_if_emptied(context, statement)
            else:
                context.edits.replace(division, _left_operand(division))
        context.need_accelerator_at(loop.statement)
        return True

    @staticmethod
    def _model(context: RuleContext, loop: Loop) -> str | None:
        facts = context.facts
        return context.local_name(loop.scope, facts.models[0]) if facts.models else None


def _accumulate_call(context: RuleContext, model) -> str:
    code = model if isinstance(model, str) else context.source.text_of(model)
    return f"{context.accelerator_expr('accumulate')}({code})"


def _left_operand(division: ast.BinOp):
    left = division.left
    keep = isinstance(left, (ast.Tuple, ast.GeneratorExp))
    return lambda _text, renderer: renderer.text_of(left, parens=keep)


def _wrap_body(loop: ast.AST, block, accumulate: str):
    """The loop with its body inside `with <accumulate>:` (one level deeper)."""

    def render(_text: str, renderer) -> str:
        source = renderer.source
        layout = renderer.block_layout(block)
        start, end, _ = renderer.span_of(loop, inner=False)
        indent = source.indentation(source.line_of(start))
        inner_indent = layout.indent
        body = renderer.span_text(layout.start, layout.end)
        deeper = indent + renderer.default_indent + inner_indent[len(indent) :]
        return (
            renderer.span_text(start, layout.start)
            + indent + renderer.default_indent + f"with {accumulate}:" + renderer.newline
            + renderer.reindent(body, inner_indent, deeper)
            + renderer.span_text(layout.end, end)
        )  # fmt: skip

    return render


def _merge_branches(context: RuleContext, branches: NoSyncBranches, accumulate: str, sync: str):
    """The rewritten `if`: both branches were edited alike, so the no_sync body's length is
    where the syncing branch's step begins."""
    source, index = context.source, context.facts.index

    def render(text: str, renderer) -> str:
        split = split_branches(source, index, branches.node, branches.steps_when_true)
        if split is None:
            return text
        inner, syncing_block = split
        repeated = len(renderer.statements_of(index.block(inner)))
        syncing = renderer.statements_of(syncing_block)
        indent = source.indentation(branches.node.lineno)
        old = renderer.block_layout(syncing_block).indent
        step_indent = indent + renderer.default_indent
        newline = renderer.newline
        return (
            f"with {accumulate}:{newline}"
            + renderer.reindent("".join(syncing[:repeated]), old, step_indent)
            + f"{step_indent}if {sync}:{newline}"
            + renderer.reindent("".join(syncing[repeated:]), old,
                                step_indent + renderer.default_indent)
        )  # fmt: skip

    return render


def _inside(loop: Loop, statement: Statement) -> list[Statement]:
    """The statements enclosing `statement` within `loop`'s body, outermost first."""
    chain = statement.chain()
    return chain[chain.index(loop.statement) + 1 :] if loop.statement in chain else []


def _step_conditions(loop: Loop):
    """The `if` statements of `loop` enclosing its optimizer steps, outermost first per step."""
    for call in loop.calls:
        if call.method == "step" and call.loop is loop:
            for statement in _inside(loop, call.statement):
                if isinstance(statement.node, ast.If):
                    yield statement.node


def _conditional_step(context: RuleContext, loop: Loop) -> tuple[ast.If, ast.expr] | None:
    """The `if (i + 1) % k == 0:` that holds the optimizer step, and k."""
    for node in _step_conditions(loop):
        found = modulo_test(context.source, node.test)
        if found is not None and found[1]:
            return node, found[0]
    return None


def _no_sync_branches(context: RuleContext, loop: Loop) -> NoSyncBranches | None:
    source, index = context.source, context.facts.index
    found = (no_sync_branches(source, index, node) for node in _step_conditions(loop))
    return next((branches for branches in found if branches is not None), None)


def _no_sync_context(context: RuleContext, loop: Loop, k):
    """(with item, model, assignment to drop or None) for the backward's enclosing
    `with model.no_sync() if ... else nullcontext():` (or `with ctx():` / `with ctx:` over
    `ctx = ...` bound in the loop) whose k is the step condition's k."""
    source = context.source
    imports = context.facts.index.imports
    for site in context.facts.backward_calls:
        if not loop.contains(site.loop):
            continue
        for statement in _inside(loop, site.statement):
            node = statement.node
            if not isinstance(node, ast.With) or len(node.items) != 1:
                continue
            item = node.items[0].context_expr
            found = conditional_no_sync(source, item, imports)
            assignment = None
            if found is None:
                found, assignment = _bound_no_sync(context, loop, item)
            if found is not None and code_of(source, found[1]) == code_of(source, k):
                return item, found[0], assignment
    return None


def _bound_no_sync(context: RuleContext, loop: Loop, item: ast.expr):
    """`with ctx():` over `ctx = model.no_sync if ... else nullcontext` (or `with ctx:` over
    the called forms), `ctx` bound once, in this loop, and used nowhere else."""
    called = not (isinstance(item, ast.Call) and not item.args and not item.keywords)
    name = item if called else item.func
    if not isinstance(name, ast.Name):
        return None, None
    bindings = loop.scope.bindings.get(name.id, [])
    uses = loop.scope.uses.get(name.id, [])
    if len(bindings) != 1 or len(uses) != 1 or bindings[0].kind != "assign":
        return None, None
    binding = bindings[0]
    if binding.loop is not loop or binding.unpacked or not isinstance(binding.small, ast.Assign):
        return None, None
    found = conditional_no_sync(context.source, binding.value, context.facts.index.imports, called)
    return (found, binding.small) if found is not None else (None, None)


def _unscaled(receiver: ast.expr) -> ast.expr:
    """`scaler.scale(loss)` -> `loss`: the GradScaler goes (MIG020); the loss is what counts."""
    if (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Attribute)
        and receiver.func.attr == "scale"
        and len(receiver.args) + len(receiver.keywords) == 1
    ):
        return receiver.args[0] if receiver.args else receiver.keywords[0].value
    return receiver


def _set_where(loop: Loop, k: ast.expr) -> str:
    """ ", set at line 6 in `train_epoch()`" for the steps a function computes itself."""
    root = root_name(k)
    bindings = loop.scope.assigns(root) if root is not None else []
    if not bindings:
        return f" (`{loop.scope.name}()`'s)" if root in loop.scope.params else ""
    return f", set at line {bindings[0].statement.node.lineno} in `{loop.scope.name}()`,"


def _backward_lines(context: RuleContext, loop: Loop) -> str:
    lines = [site.node.lineno for site in context.facts.backward_calls if loop.contains(site.loop)]
    return "the backward at line " + ", ".join(map(str, lines)) if lines else "the loop"


def _divisions(context: RuleContext, loop: Loop, k: ast.expr):
    """[(node, "statement" | "expression")] dividing the backward's loss by k."""
    source = context.source
    wanted = code_of(source, k)
    receivers = {}
    for site in context.facts.backward_calls:
        if loop.contains(site.loop) and site.receiver is not None:
            receiver = _unscaled(site.receiver)
            receivers[code_of(source, receiver)] = (site, receiver)
    found = []
    for code, (site, receiver) in receivers.items():
        if isinstance(receiver, ast.BinOp) and isinstance(receiver.op, ast.Div):
            if code_of(source, receiver.right) == wanted:
                found.append((receiver, "expression"))
            continue
        for binding in site.scope.bindings.get(code, []):
            if not loop.contains(binding.loop) or binding.small is None:
                continue
            small = binding.small
            if isinstance(small, ast.AugAssign) and isinstance(small.op, ast.Div):
                if code_of(source, small.value) == wanted:
                    found.append((small, "statement"))
            elif isinstance(small, ast.Assign) and isinstance(small.value, ast.BinOp):
                value = small.value
                if isinstance(value.op, ast.Div) and code_of(source, value.right) == wanted:
                    if code_of(source, value.left) == code:
                        found.append((small, "statement"))
                    else:
                        found.append((value, "expression"))
    return found
