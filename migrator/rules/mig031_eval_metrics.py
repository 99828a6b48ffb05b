"""MIG031 eval metrics: in eval loops over prepared loaders each process sees a shard, so a
metric summed from its own predictions counts only its shard (and padded duplicates at the
tail). Before the first statement that accumulates a metric from per-process tensors
(`correct += ...`, `total_loss += ...`, `preds.append(...)`, `metric.update(...)`), those
tensors pass through `accelerator.gather_for_metrics(...)`, which also drops the padding:

    output = model(data)
    output, target = accelerator.gather_for_metrics((output, target))
    correct += output.argmax(dim=1).eq(target).sum().item()

Per-process tensors are the loader's batch data and the prepared model's outputs, and whatever
is computed from them; once gathered, a name and what is computed from it are global, so
nothing is gathered twice.

A metric accumulated from gathered tensors is whole on every process: a hand-written
all-reduce of it (or of a tensor built from it, `stats = torch.tensor([correct, seen])`) in
the same function would count it N times, so it goes, and so does the division by the world
size that turned such a sum into a mean (`acc /= world_size`).
"""

from __future__ import annotations

import libcst as cst

from migrator.analysis.distributed_facts import NUM_PROCESSES
from migrator.analysis.facts import DataRegion
from migrator.analysis.index import Block, Loop, Scope
from migrator.analysis.patterns import name_of
from migrator.rules.base import Rule, RuleContext

ACCUMULATING_METHODS = {"append", "extend", "update", "add_batch", "add", "add_"}
COLLECTIVES = {"gather_for_metrics", "gather", "reduce"}


class EvalMetrics(Rule):
    code = "MIG031"
    name = "eval-metrics"
    summary = "gather predictions and targets with accelerator.gather_for_metrics before metrics"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        facts = context.facts
        for region in facts.regions:
            loop = region.loop
            if loop is None or loop not in facts.eval_loops:
                continue
            if region.loader is None or not context.prepared(region.loader.name):
                continue
            body = _body_block(context, loop)
            if body is not None:
                walker = _Walker(context, region)
                walker.block(body, set(region.names))
                _drop_hand_reductions(context, region.scope, walker.metrics)


class _Walker:
    def __init__(self, context: RuleContext, region: DataRegion) -> None:
        self.context = context
        self.models = {
            name for name in [*region.scope.params, *region.scope.bindings, *region.scope.uses]
            if context.prepared_role(region.scope, name.lstrip("*")) == "model"
        }  # fmt: skip
        self.gathered: set[str] = set()  # names whole on every process after a gather
        self.metrics: set[str] = set()  # accumulators of gathered values

    def block(self, block: Block, local: set[str]) -> None:
        """Walk statements in order; `local` holds the names that are still per-process."""
        for index, node in enumerate(block.statements):
            if isinstance(node, cst.SimpleStatementLine):
                for small in node.body:
                    self.small(block, index, small, local)
            elif isinstance(node, (cst.With, cst.If, cst.Try)):
                for child in _child_blocks(self.context, node):
                    self.block(child, local)

    def small(self, block: Block, index: int, small: cst.CSTNode, local: set[str]) -> None:
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            value = small.value
            targets = _targets(small)
            if self._collective(value):
                local.difference_update(targets)  # already gathered: global from here on
                self.gathered.update(targets)
            elif value is not None and (self._reads(value, local) or self._forward(value)):
                local.update(targets)
            else:
                local.difference_update(targets)
                if value is not None and self._reads(value, self.gathered):
                    self.gathered.update(targets)
            return
        accumulated = self._accumulation(small)
        if accumulated is None:
            return
        names = [n for n in _names_in(accumulated) if n in local]
        names = list(dict.fromkeys(names))
        if not names:
            if self._reads(accumulated, self.gathered):
                self.metrics.add(_accumulator(small))
            return
        gathered = ", ".join(names)
        target = gathered if len(names) > 1 else names[0]
        argument = f"({gathered})" if len(names) > 1 else names[0]
        code = f"{target} = {self.context.accelerator}.gather_for_metrics({argument})\n"
        self.context.edits.insert(block.holder, index, self.context.statement(code), priority=20)
        self.context.need_accelerator_before(block, index)
        local.difference_update(names)
        self.gathered.update(names)
        self.metrics.add(_accumulator(small))

    def _accumulation(self, small: cst.CSTNode) -> cst.CSTNode | None:
        """The expression a metric accumulates, if `small` accumulates one."""
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
            return small.value
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Attribute) and func.attr.value in ACCUMULATING_METHODS:
                return small.value.with_changes(func=cst.Name("_"))  # only the arguments count
        return None

    def _collective(self, value: cst.CSTNode | None) -> bool:
        return (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in COLLECTIVES
            and name_of(value.func.value) in self.context.facts.accelerator_names
        )

    def _reads(self, expr: cst.CSTNode, local: set[str]) -> bool:
        return any(name in local for name in _names_in(expr))

    def _forward(self, expr: cst.CSTNode) -> bool:
        models = self.models

        class _Finder(cst.CSTVisitor):
            found = False

            def visit_Call(self, node: cst.Call) -> None:
                if name_of(node.func) in models:
                    _Finder.found = True

        expr.visit(_Finder())
        return _Finder.found


def _accumulator(small: cst.CSTNode) -> str | None:
    """`correct` of `correct += ...`, `preds` of `preds.append(...)`."""
    if isinstance(small, cst.AugAssign):
        return name_of(small.target)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        return name_of(func.value) if isinstance(func, cst.Attribute) else None
    return None


def _drop_hand_reductions(context: RuleContext, scope: Scope, metrics: set[str]) -> None:
    """`dist.all_reduce(t)` of a gathered metric, or of a tensor built from one, goes (MIG010
    would make it `accelerator.reduce`), with `t /= world_size` after it."""
    metrics = {m for m in metrics if m}
    grew = True
    while grew:  # names computed from metrics, in this function
        grew = False
        for name, bindings in scope.bindings.items():
            if name not in metrics and any(
                b.value is not None and set(_names_in(b.value)) & metrics for b in bindings
            ):
                metrics.add(name)
                grew = True
    for reduction in context.facts.distributed.reductions:
        if (
            reduction.tensor in metrics
            and reduction.site.scope is scope
            and reduction.site.small is not None
        ):
            context.edits.remove(reduction.site.small)
            _drop_world_size_division(context, scope, reduction.tensor)


def _drop_world_size_division(context: RuleContext, scope: Scope, tensor: str) -> None:
    for binding in scope.bindings.get(tensor, []):
        small = binding.small
        if (
            isinstance(small, cst.AugAssign)
            and isinstance(small.operator, cst.DivideAssign)
            and _is_world_size(context, scope, small.value)
        ):
            context.edits.remove(small)


def _is_world_size(context: RuleContext, scope: Scope, expr: cst.BaseExpression) -> bool:
    """A name holding the world size, or a `dist.get_world_size()` call (MIG010's facts)."""
    facts = context.facts
    if isinstance(expr, cst.Name):
        return facts.rank_kind(scope, expr.value) == NUM_PROCESSES
    return any(site.node is expr and kind == NUM_PROCESSES
               for site, kind in facts.distributed.rank_calls)  # fmt: skip


def _body_block(context: RuleContext, loop: Loop) -> Block | None:
    body = loop.node.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    statement = context.facts.index.statement_of.get(id(body.body[0]))
    return statement.block if statement is not None else None


def _child_blocks(context: RuleContext, node: cst.CSTNode) -> list[Block]:
    blocks = []
    for child in _bodies(node):
        if isinstance(child, cst.IndentedBlock) and child.body:
            statement = context.facts.index.statement_of.get(id(child.body[0]))
            if statement is not None:
                blocks.append(statement.block)
    return blocks


def _bodies(node: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(node, cst.With):
        return [node.body]
    if isinstance(node, cst.If):
        bodies = [node.body]
        if isinstance(node.orelse, cst.If):
            bodies += _bodies(node.orelse)
        elif isinstance(node.orelse, cst.Else):
            bodies.append(node.orelse.body)
        return bodies
    if isinstance(node, cst.Try):
        return [node.body, *(h.body for h in node.handlers)]
    return []


def _targets(small: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    targets = small.targets if isinstance(small, cst.Assign) else [small]
    for target in targets:
        expr = target.target
        if isinstance(expr, (cst.Tuple, cst.List)):
            values = [element.value for element in expr.elements]
        else:
            values = [expr]
        names.update(value.value for value in values if isinstance(value, cst.Name))
    return names


def _names_in(expr: cst.CSTNode) -> list[str]:
    """Names read in `expr`, in order (attribute names and keywords excluded)."""
    found: list[str] = []

    class _Collector(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            found.append(node.value)

    expr.visit(_Collector())
    return found
