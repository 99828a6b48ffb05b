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

A per-batch value that is not a batch tensor (a Python number `psnr = 10 * log10(1 /
mse.item())`, a loss `loss = criterion(output, target)`) is never gathered: it is all-reduced
before the metric statement, with the mean when the metric is averaged over batches (divided
by `len(loader)` or a batch counter, or listed), else the sum (metric_values.py). Tensors that
later metric statements read are gathered with the first ones, in one call
(`predicted, labels = accelerator.gather_for_metrics((predicted, labels))`). A number
combined with batch tensors in one metric statement is a finding.

A metric accumulated from gathered tensors is whole on every process: a hand-written
all-reduce of it (or of a tensor built from it, `stats = torch.tensor([correct, seen])`) in
the same function would count it N times, so it goes, and so does the division by the world
size that turned such a sum into a mean (`acc /= world_size`).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.patterns import name_of, preorder
from migrator.analysis.roles.facts import DataRegion
from migrator.analysis.syntax.index import Block, Line, Loop
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.hand_reductions import drop_hand_reductions
from migrator.rules.metric_forwards import hoisted_forward, region_models
from migrator.rules.metric_values import (
    PerBatchValues,
    averaged_per_batch,
    insert_reduction,
    is_collection,
    itemised_names,
    read_after,
    reduce_in_place,
)
from migrator.rules.padded_batches import dropped_note, drops_last, padding_note

ACCUMULATING_METHODS = {"append", "extend", "update", "add_batch", "add", "add_"}
COLLECTIVES = {"gather_for_metrics", "gather", "reduce"}
METHOD = "<method>"  # stands for `values` of `values.append(x)`: no Python name can clash


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
            if region.loader is None or not all(
                feed is not None and context.prepared(feed.name) for feed in region.feeds
            ):
                continue  # (a helper's loop: every call's loader, `loader_params`)
            body = _body_block(context, loop)
            if body is not None:
                walker = _Walker(context, region, loop)
                # the loop's batch names (seeds) too: the walk follows them statement by
                # statement (`images, masks = to_device(images, masks)` keeps them batches)
                walker.block(body, {*region.names, *region.seeds})
                drop_hand_reductions(context, region.scope, walker.metrics)


def _gather_groups(loop: ast.AST, names: list[str]) -> list[list[str]]:
    """The gathers of `names`: one of them all, but a field of a dict batch (`texts =
    batch["review_text"]`), which may hold Python objects (a list of strings), on its own. A
    tuple holding tensors and objects is gathered as one object per process (HF's
    `gather_object` then flattens it, and the unpacking fails); alone, each is gathered as
    what it is."""
    fields = set()
    for node in ast.walk(loop):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        pairs = [(node.targets[0], node.value)]
        if isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple):
            pairs = list(zip(node.targets[0].elts, node.value.elts))  # `a, b = d["a"], d["b"]`
        for target, value in pairs:
            keyed = isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant)
            if isinstance(target, ast.Name) and keyed and isinstance(value.slice.value, str):
                fields.add(target.id)
    together = [n for n in names if n not in fields]
    alone = [[n] for n in names if n in fields]
    return [together, *alone] if together else alone


class _Walker:
    def __init__(self, context: RuleContext, region: DataRegion, loop: Loop) -> None:
        self.context = context
        self.region = region
        self.loop = loop
        self.values = PerBatchValues(context)  # Python numbers and 0-d tensors per batch
        self.models = region_models(context, region)
        self.gathered: set[str] = set()  # names whole on every process after a gather
        self.metrics: set[str] = set()  # accumulators of gathered values
        self.collections: set[str] = set()  # per-process Python sets: never gathered
        self.ungathered: set[str] = set()  # batch tensors a finding left per-process
        self.padding_said = False

    def block(self, block: Block, local: set[str]) -> None:
        """Walk statements in order; `local` holds the names that are still per-process."""
        for index, node in enumerate(block.statements):
            if isinstance(node, Line):
                for small in node.body:
                    self.small(block, index, small, local)
            elif isinstance(node, (ast.With, ast.AsyncWith, ast.If, ast.Try)):
                for child in _child_blocks(self.context, node):
                    self.block(child, local)

    def small(self, block: Block, index: int, small: ast.stmt, local: set[str]) -> None:
        if isinstance(small, (ast.Assign, ast.AnnAssign)):
            value = small.value
            targets = _targets(small)
            self.values.forget(targets)
            self.collections.difference_update(targets)
            if is_collection(value):
                self.collections.update(targets)
            if self._collective(value):
                local.difference_update(targets)  # already gathered: global from here on
                self.gathered.update(targets)
            elif value is not None and (self._reads(value, local) or self._forward(value)):
                local.update(targets)
                self.values.bind(targets, value, local)
            else:
                local.difference_update(targets)
                if value is not None and self._reads(value, self.gathered):
                    self.gathered.update(targets)
            return
        accumulated = self._accumulation(small)
        if accumulated is None:
            return
        names = [n for n in _names_in_all(accumulated) if n in local and n != "_"]
        names = list(dict.fromkeys(names))
        self.values.scalars.update(n for n in itemised_names(accumulated) if n in names)
        if not names:
            if any(name in self.gathered for name in _names_in_all(accumulated)):
                self.metrics.add(_accumulator(small))
            return
        numbers = [name for name in names if name in self.values]
        if numbers and len(numbers) < len(names):  # a number beside batch tensors
            self.context.findings.append(Finding(
                code="MIG031", node=small,
                message=f"`{numbers[0]}` (one value for this process's batch) is combined "
                "with its tensors in a metric; gather what it is computed from by hand",
            ))  # fmt: skip
            local.difference_update(names)
            self.ungathered.update(n for n in names if n not in numbers)
            return
        spoiled = [n for n in _names_in_all(accumulated) if n in self.ungathered]
        if spoiled and not numbers:  # `labels` left per-process: gathering `logits` alone
            self.context.findings.append(Finding(
                code="MIG031", node=small,
                message=f"this metric counts only this process's batches: `{spoiled[0]}` is "
                "this process's batch (a metric above keeps it so), so the others cannot be "
                "gathered beside it; gather them together by hand",
            ))  # fmt: skip
            local.difference_update(names)
            return
        if numbers:
            self._reduce_numbers(block, index, small, numbers)
        elif self._kept_per_process(block, index, small, names):
            return
        else:
            names = hoisted_forward(self, block, index, accumulated, names) or names
            names = self._with_later_metric_names(block, index, names, local)
            for group in _gather_groups(self.loop.node, names):
                gathered = ", ".join(group)
                target = gathered if len(group) > 1 else group[0]
                argument = f"({gathered})" if len(group) > 1 else group[0]
                code = f"{target} = {self.context.accelerator}.gather_for_metrics({argument})\n"
                self.context.edits.insert(block, index, self.context.statement(code), priority=20)
            self.context.need_accelerator_before(
                block, index, "accelerator.gather_for_metrics(...)"
            )
            self._say_ends()
        local.difference_update(names)
        self.gathered.update(names)
        self.metrics.add(_accumulator(small))

    def _kept_per_process(self, block: Block, index: int, small: ast.stmt, names) -> bool:
        """When `names` cannot be gathered in place (a Python set, or code after the metric
        still reads this process's batch, `recon.view(batch_size, ...)`), a number
        accumulated from them is reduced where it stands (`hits += len(a & b)`), and any
        other metric is a finding; either way nothing is gathered (True)."""
        context = self.context
        collection = next((name for name in names if name in self.collections), None)
        later = None if collection else read_after(self.loop, small, names, self._accumulation)
        if collection is None and later is None:
            return False
        accumulator = _accumulator(small)
        mean = averaged_per_batch(context, self.region.scope, self.loop, accumulator)
        if isinstance(small, ast.AugAssign) and reduce_in_place(
            context, small, "mean" if mean else "sum"
        ):
            context.need_accelerator_before(block, index, "accelerator.reduce(...)")
            self.metrics.add(accumulator)
            return True
        if collection is not None:
            why = f"`{collection}` is a Python set per batch, which cannot be gathered"
        else:
            why = (
                f"line {later[1]} still reads `{later[0]}` as this process's batch, so it "
                "cannot be gathered in place"
            )
        context.findings.append(Finding(
            code="MIG031", node=small,
            message=f"this metric counts only this process's batches: {why}; reduce the "
            "per-batch number (`accelerator.reduce`) or gather into new names by hand",
        ))  # fmt: skip
        return True

    def _reduce_numbers(self, block: Block, index: int, small: ast.stmt, numbers) -> None:
        """A Python number per batch (`psnr = 10 * log10(1 / mse.item())`) is never gathered
        (`gather_for_metrics` of a float is a list): it is all-reduced as a tensor. A metric
        averaged over batches (divided by `len(loader)` or by a per-batch counter) takes the
        mean over processes, so the average equals the 1-process one (each process sees its
        share of the same batches); any other accumulation takes the sum."""
        context = self.context
        accumulator = _accumulator(small)
        listed = isinstance(small, ast.Expr)  # `values.append(x)`: averaged (np.mean) later
        mean = listed or averaged_per_batch(context, self.region.scope, self.loop, accumulator)
        reduction = "mean" if mean else "sum"
        for name in numbers:  # a tensor already (`self.values.scalars`): reduced as it is
            insert_reduction(context, block, index, name, reduction, name in self.values.scalars)
        context.need_accelerator_before(block, index, "accelerator.reduce(...)")
        self._say_ends(numbers)

    def _say_ends(self, numbers=()) -> None:
        """Once a loop: what the prepared loader does at the end of the data - repeats that
        a batch-by-batch reduction counts, or (`drop_last=True`) a last round dropped."""
        if self.padding_said:
            return
        name = self.region.loader.name
        if drops_last(self.context.tree, self.context.facts.index.imports, name):
            dropped_note(self.context, self.loop, name)
            self.padding_said = True
        elif numbers:  # (a gather before a reduction says nothing: its padding is dropped)
            padding_note(self.context, self.loop, name, numbers)
            self.padding_said = True

    def _with_later_metric_names(self, block: Block, index: int, names, local: set[str]):
        """`names`, and the per-process names that later metric statements of this block read
        and nothing else reads or rebinds before them: one `gather_for_metrics` of them all
        before the first metric statement, not one per statement. Ordered as the metric
        statement reading most of them reads them (`predicted, labels`)."""
        spoiled: set[str] = set()
        readings = [names]
        extra: list[str] = []
        for small in _simple_statements(self.context, block.statements[index + 1 :]):
            accumulated = self._accumulation(small)
            read = list(dict.fromkeys(_names_in_all(accumulated or [small])))
            if accumulated is not None:
                wanted = [
                    n
                    for n in read
                    if n in local and n not in self.values and n not in spoiled and n not in names
                ]
                extra += [n for n in wanted if n not in extra]
                readings.append([n for n in read if n in names or n in wanted])
            else:
                spoiled.update(read)
            if isinstance(small, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                spoiled.update(_targets(small) if not isinstance(small, ast.AugAssign) else ())
        chosen = [*names, *extra]
        if len(chosen) == 1:
            return chosen
        most = max(readings, key=lambda read: len(set(read) & set(chosen)))
        ordered = [n for n in most if n in chosen]
        return ordered + [n for n in chosen if n not in ordered]

    def _accumulation(self, small: ast.stmt) -> list | None:
        """What a metric accumulates (expressions, and METHOD for a method's own name), if `small`
        accumulates one."""
        if isinstance(small, ast.AugAssign) and isinstance(small.target, ast.Name):
            return [small.value]
        if isinstance(small, ast.Expr) and isinstance(small.value, ast.Call):
            func = small.value.func
            if isinstance(func, ast.Attribute) and func.attr in ACCUMULATING_METHODS:
                call = small.value  # only the arguments count (the method read as `_`)
                return [ast.Name(id=METHOD), *call.args, *(k.value for k in call.keywords)]
        return None

    def _collective(self, value: ast.AST | None) -> bool:
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in COLLECTIVES
            and name_of(value.func.value) in self.context.facts.accelerator_names
        )

    def _reads(self, expr: ast.AST, local: set[str]) -> bool:
        return any(name in local for name in _names_in(expr))

    def _forward(self, expr: ast.AST) -> bool:
        models = self.models
        return any(
            isinstance(node, ast.Call) and name_of(node.func) in models for node in ast.walk(expr)
        )


def _simple_statements(context: RuleContext, statements: list) -> list[ast.stmt]:
    """The simple statements of `statements` in order, those of the blocks of `with`, `if`
    and `try` statements included (as the walker reads them)."""
    found: list[ast.stmt] = []
    for node in statements:
        if isinstance(node, Line):
            found += node.body
        elif isinstance(node, (ast.With, ast.AsyncWith, ast.If, ast.Try)):
            for child in _child_blocks(context, node):
                found += _simple_statements(context, child.statements)
        elif isinstance(node, ast.stmt):
            found.append(node)
    return found


def _accumulator(small: ast.stmt) -> str | None:
    """`correct` of `correct += ...`, `preds` of `preds.append(...)`."""
    if isinstance(small, ast.AugAssign):
        return name_of(small.target)
    if isinstance(small, ast.Expr) and isinstance(small.value, ast.Call):
        func = small.value.func
        return name_of(func.value) if isinstance(func, ast.Attribute) else None
    return None


def _body_block(context: RuleContext, loop: Loop) -> Block | None:
    block = context.facts.index.block(loop.node)
    return block if block is not None and block.kind == "body" else None


def _child_blocks(context: RuleContext, node: ast.AST) -> list[Block]:
    index = context.facts.index
    blocks = []
    for owner, field in _bodies(context, node):
        block = index.block(owner, field)
        if block is not None and block.kind == "body":
            blocks.append(block)
    return blocks


def _bodies(context: RuleContext, node: ast.AST) -> list[tuple[ast.AST, str]]:
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [(node, "body")]
    if isinstance(node, ast.If):
        bodies = [(node, "body")]
        if node.orelse:
            first = node.orelse[0]
            source = context.source
            if (
                len(node.orelse) == 1
                and isinstance(first, ast.If)
                and source.text.startswith("elif", source.start(first))
            ):
                bodies += _bodies(context, first)
            else:
                bodies.append((node, "orelse"))
        return bodies
    if isinstance(node, ast.Try):
        return [(node, "body"), *((handler, "body") for handler in node.handlers)]
    return []


def _targets(small: ast.stmt) -> set[str]:
    names: set[str] = set()
    targets = small.targets if isinstance(small, ast.Assign) else [small.target]
    for expr in targets:
        values = expr.elts if isinstance(expr, (ast.Tuple, ast.List)) else [expr]
        names.update(value.id for value in values if isinstance(value, ast.Name))
    return names


def _names_in(expr: ast.AST) -> list[str]:
    """Names read in `expr`, in order (attribute names and keywords excluded)."""
    return [node.id for node in preorder(expr) if isinstance(node, ast.Name)]


def _names_in_all(exprs: list) -> list[str]:
    return [name for expr in exprs for name in _names_in(expr)]
