"""Which reduction makes a running sum of per-process data the 1-process number (MIG032,
reduced_outputs.py), read from how the sum is built and how it is read after the loop:

- a sum of sample counts or of sums over samples (`correct += (pred == y).sum()`, `seen +=
  y.size(0)`), or one every read divides by a count of samples (the whole data's,
  `len(loader.dataset)`, or a sample sum this loop keeps) adds up over the processes:
  `"sum"`;
- a sum of per-batch averages (`total += loss.item()`) that every read divides by this
  process's count of batches (`len(loader)`, a name the loop adds 1 to, the `enumerate`
  index plus one, `total /= len(loader)`, a window's constant), or whose every increment is
  divided by it (`total += loss.item() / len(loader)`), is an average over batches on each
  process: `"mean"`;
- such a sum read as it is (`print("Loss", total)`, the sum of the batch losses), or divided
  by a number that is the same on every process and counts no batches (`total / 100`, `total
  / train_size` of a size computed before the loop), is the sum over every process's batches:
  `"sum"` (the processes' batches together are the original's, at the default N x global
  batch, and a constant divisor scales the sum alike), and so is one read both ways (printed
  over `len(loader.dataset)` and returned as it is);
- anything else (a divisor this cannot classify, reads of both kinds) is not reduced: None.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.effects.extents import CONST, GLOBAL
from migrator.analysis.syntax.index import Loop, Scope
from migrator.rules.metric_values import SAME_VALUE
from migrator.rules.running_sums import (
    COUNTER,
    PER_SAMPLE,
    increment_kind,
    parent_of,
    restarted_window,
    scope_nodes,
)

SUM, MEAN = "sum", "mean"


class SumReduction:
    def __init__(self, values, imports, scope: Scope, loop: Loop, sums: dict) -> None:
        self.values = values
        self.imports = imports
        self.scope = scope
        self.loop = loop
        self.periods: set[str] = set()  # a restarted window's periods (`of`)
        kinds = {name: {increment_kind(i.value) for i in incs} for name, incs in sums.items()}
        self.samples = {name for name, k in kinds.items() if k == {PER_SAMPLE}}
        self.counters = {name for name, k in kinds.items() if k == {COUNTER}}

    def of(self, name: str, increments, reads: list[ast.Name], window: bool) -> str | None:
        kinds = {increment_kind(i.value) for i in increments}
        found = restarted_window(self.loop.node, name) if window else None
        # `if step % cfg.log_every == 0: print(running / cfg.log_every)`: the window's period
        test = found[0].test if found is not None else None
        self.periods = {
            ast.dump(node.right)
            for node in (ast.walk(test) if test is not None else ())
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)
        }
        divisions = self._divisions_after(name, window)
        if divisions:  # `total /= len(loader)`: the reads after it read the quotient
            first = min(d.lineno for d in divisions)
            reads = [read for read in reads if read.lineno < first]
        classes = {self._read(read, window) for read in [*reads, *divisions]}
        if kinds == {PER_SAMPLE} or classes == {"samples"}:
            return SUM
        if classes == {"batches"}:
            return MEAN
        if all(self._per_batch_increment(i.value) for i in increments) and classes <= {"raw"}:
            return MEAN  # `total += loss.item() / len(loader)`: averaged as it is added
        if classes <= {"raw", "samples"}:
            return SUM  # `print(total / len(loader.dataset))` and `return total`: the sum
        return None

    def _read(self, read: ast.AST, window: bool) -> str:
        """How one read uses the sum: "samples" / "batches" (divided by a count of them),
        "raw", or "other"."""
        if isinstance(read, ast.AugAssign):  # `total /= len(loader)`
            divisor = read.value
        else:
            read = self._as_number(read)
            parent = parent_of(self.scope.node, read)
            if not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div)):
                return "raw"
            if parent.left is not read:
                return "other"
            divisor = parent.right
        if GLOBAL in self.values.extents(divisor, self.scope) or (
            isinstance(divisor, ast.Name) and divisor.id in self.samples
        ):
            return "samples"
        if self._batch_count(divisor) or (
            window and (isinstance(divisor, ast.Constant) or ast.dump(divisor) in self.periods)
        ):
            return "batches"  # a window's length counts its batches
        if isinstance(divisor, ast.Constant):
            return "raw"  # `total / 100`: scaled, as the sum is
        if self.values.extents(divisor, self.scope) == {CONST} and not (
            self.values.roles(divisor, self.scope) & {"world", "iterations", "batchsize"}
        ):
            return "raw"  # `total / train_size`, a number alike everywhere: scaled, as the sum is
        return "other"

    def _as_number(self, read: ast.AST) -> ast.AST:
        """`total.item()`, `total.detach().cpu()`, `float(total)`: the same value, read."""
        node = read
        while True:
            parent = parent_of(self.scope.node, node)
            if isinstance(parent, ast.Attribute) and parent.attr in SAME_VALUE:
                call = parent_of(self.scope.node, parent)
                if not (isinstance(call, ast.Call) and call.func is parent):
                    return node
                node = call
            elif (
                isinstance(parent, ast.Call)
                and patterns.name_of(parent.func) in ("float", "int")
                and parent.args[:1] == [node]
            ):
                node = parent
            else:
                return node

    def _divisions_after(self, name: str, window: bool) -> list[ast.AugAssign]:
        if window:
            return []
        end = self.loop.node.end_lineno or 0
        return [
            node for node in scope_nodes(self.scope.node)
            if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div)
            and isinstance(node.target, ast.Name) and node.target.id == name
            and node.lineno > end
        ]  # fmt: skip

    def _per_batch_increment(self, value: ast.AST) -> bool:
        return (
            isinstance(value, ast.BinOp)
            and isinstance(value.op, ast.Div)
            and self._batch_count(value.right)
        )

    def _batch_count(self, expr: ast.AST, depth: int = 0) -> bool:
        """This process's number of batches: `len(loader)` of a loader or of what the loop
        iterates (`tqdm(loader)` bound to a name), a name the loop adds 1 to, `i + 1` of the
        loop's `enumerate` index, or a name bound once to one of these after the loader is
        prepared (`nb = batches_per_epoch = len(loader)`)."""
        if isinstance(expr, ast.Name) and expr.id in self.counters:
            return True
        if isinstance(expr, ast.Name) and depth < 3:
            bindings = self.scope.assigns(expr.id)
            if len(bindings) == 1 and not bindings[0].unpacked and bindings[0].value is not None:
                value = bindings[0].value
                line = bindings[0].statement.node
                after = self._after_prepare(value, getattr(line, "lineno", None) or value.lineno)
                return after and self._batch_count(value, depth + 1)
        if isinstance(expr, ast.Call) and patterns.name_of(expr.func) == "len" and expr.args:
            counted = expr.args[0]
            if self.values.roles(counted, self.scope) & {"loader", "iterator", "plainloader"}:
                return True
            name = patterns.name_of(counted)
            iterated, _ = patterns.loader_base(getattr(self.loop.node, "iter", None), self.imports)
            return name is not None and name in (iterated, self._iterated_name())
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            index = self._enumerate_index()
            one = isinstance(expr.right, ast.Constant) and expr.right.value == 1
            return index is not None and patterns.name_of(expr.left) == index and one
        return False

    def _after_prepare(self, value: ast.AST, line: int) -> bool:
        """`len(loader)` (or an alias of it) read after `loader = accelerator.prepare(...)`:
        the prepared loader's length, this process's share (before it: the whole set's)."""
        counted = value
        if isinstance(value, ast.Call) and patterns.name_of(value.func) == "len" and value.args:
            counted = value.args[0]
        name = patterns.name_of(counted)
        if name is None:
            return False
        if not (isinstance(value, ast.Call) and patterns.name_of(value.func) == "len"):
            return True  # an alias: its own binding is checked in turn
        return any(
            isinstance(b.value, ast.Call)
            and isinstance(b.value.func, ast.Attribute)
            and b.value.func.attr == "prepare"
            and b.value.lineno < line
            for b in self.scope.assigns(name)
        )

    def _iterated_name(self) -> str | None:
        """`loader` of `for i, x in enumerate(loader)` where `loader = tqdm(dataloader)`."""
        source = getattr(self.loop.node, "iter", None)
        while isinstance(source, ast.Call) and source.args:
            source = source.args[0]
        return patterns.name_of(source)

    def _enumerate_index(self) -> str | None:
        node = self.loop.node
        target, source = getattr(node, "target", None), getattr(node, "iter", None)
        if (
            isinstance(source, ast.Call)
            and patterns.name_of(source.func) == "enumerate"
            and isinstance(target, ast.Tuple)
            and target.elts
            and isinstance(target.elts[0], ast.Name)
        ):
            return target.elts[0].id
        return None
