"""MIG032 per-process outputs: what a process prints, logs, returns or decides on from its
share of a prepared loader is reduced over the processes, so it is the 1-process number.

It runs on the migrated text, after the other rules (they decide what is prepared and
gathered; this pass sees the program as it will run), reading per-process values from
analysis/effects/values.py:

- a running sum over a loop on a prepared loader (`total_loss += loss.item()`, `correct +=
  (pred == y).sum()`, `seen += y.size(0)`, `steps += 1`), set before the loop in its block and
  read after it while still this process's own, is all-reduced right after the loop:
  `"sum"`, so numerator and denominator count the whole data alike; `"mean"` when every read
  divides it by this process's batch count (`total_loss / len(loader)`, an average of batch
  averages on every process's share);
- a per-batch loss printed inside such a loop (`print(f"... {loss.item()}")`) is printed as
  the mean over the processes (`accelerator.reduce(loss.detach(), "mean").item()`), where
  every process reaches the print;
- any other per-process value that reaches an output gets a note saying it is this
  process's.
The soundness check (migrator/soundness/per_process.py) then refuses what remains mixed or
decided per process.
"""

from __future__ import annotations

import ast

from migrator.analysis.effects.values import LOCAL, PerProcessValues
from migrator.analysis.syntax.index import Block, Line, Loop, Scope
from migrator.edits import EditSet, NewStatement
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext

OUTPUTS = {"print", "info", "debug", "warning", "log"}
PER_SAMPLE, PER_BATCH, COUNTER = "per sample", "per batch", "counter"
LOSS_WORDS = ("loss", "criterion", "entropy")


class ReducedOutputs(Rule):
    code = "MIG032"
    name = "per-process-outputs"
    summary = "running sums and printed losses of per-process data reduced over the processes"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        """Nothing on the input: `reduce_outputs` runs on the migrated text."""


def reduce_outputs(model, target_torch: str = "torch") -> tuple[EditSet, list[Finding], bool]:
    """The edits that reduce the per-process values of the migrated module `model`
    (soundness.model.OutputModel), the notes for those left, and whether `torch` is read by
    the new code."""
    values = PerProcessValues(model.index, model.graph)
    pass_ = _Pass(model, values, target_torch)
    for scope in model.index.scopes:
        for loop in scope.loops:
            if model.processes.runs_on_every_process(loop.statement) and pass_.over_prepared(loop):
                pass_.reduce_sums(loop)
        if scope.kind != "class":
            pass_.reduce_printed_losses(scope)
    return pass_.edits, pass_.notes, pass_.uses_torch


class _Pass:
    def __init__(self, model, values: PerProcessValues, torch: str) -> None:
        self.model = model
        self.values = values
        self.torch = torch
        self.edits = EditSet()
        self.notes: list[Finding] = []
        self.uses_torch = False
        self.reduced: set[tuple[int, str]] = set()
        self.reduced_nodes: set[int] = set()

    def over_prepared(self, loop: Loop) -> bool:
        """Does `loop` draw batches from a prepared loader (directly, through a wrapper, or
        with `next(...)` on an iterator over one)?"""
        scope = loop.scope
        node = loop.node
        if isinstance(node, (ast.For, ast.AsyncFor)):
            iterable = node.iter
            if self.values.roles(iterable, scope) & {"loader", "iterator"}:
                return True
            if isinstance(iterable, ast.Call) and any(
                self.values.roles(a, scope) & {"loader", "iterator"} for a in iterable.args
            ):
                return True
        return any(
            isinstance(inner, ast.Call)
            and _called(inner) == "next"
            and inner.args
            and self.values.roles(inner.args[0], scope) & {"iterator", "loader"}
            for inner in _own_nodes(node)
        )

    # -- running sums ----------------------------------------------------------------------------
    def reduce_sums(self, loop: Loop) -> None:
        scope = loop.scope
        accelerator = _accelerator_in(self.values, scope)
        block, position = loop.statement.block, loop.statement.index
        if accelerator is None or block.kind == "suite":
            return
        for name, increments in _running_sums(loop).items():
            key = (id(loop.node), name)
            if key in self.reduced or not _zeroed_before(block, position, name):
                continue
            if _rebound_in(loop.node, name):
                continue  # not a plain running sum
            if not any(LOCAL in self.values.extents(i.value, scope) for i in increments):
                continue
            reads = _reads_after(scope, loop, name)
            if not reads or not any(LOCAL in self.values.extents(r, scope) for r in reads):
                continue
            if any(_collective_argument(scope.node, r) for r in reads):
                continue  # the program reduces or gathers it itself
            kinds = {_increment_kind(i.value) for i in increments}
            if kinds == {COUNTER} or len(kinds) != 1:
                continue  # this process's passes: as many as the original's with split batches
            reduction = "sum" if kinds == {PER_SAMPLE} else "mean"
            if all(_number_like(i.value, scope) for i in increments):
                self.uses_torch = True
                code = (
                    f"{name} = {accelerator}.reduce({self.torch}.tensor({name}, "
                    f'device={accelerator}.device), "{reduction}").item()\n'
                )
            else:  # a tensor, or an array's number: a tensor on the device, reduced
                self.uses_torch = True
                code = (
                    f"{name} = {accelerator}.reduce({self.torch}.as_tensor({name}, "
                    f'device={accelerator}.device), "{reduction}")\n'
                )

            self.edits.insert(block, position + 1, NewStatement(code), priority=30)
            self.reduced.add(key)

    # -- printed losses ------------------------------------------------------------------------
    def reduce_printed_losses(self, scope: Scope) -> None:
        """`print(f"... {loss.item()}")` of this process's loss, where every process reaches
        the print: the mean over the processes (the whole batch's loss)."""
        accelerator = _accelerator_in(self.values, scope)
        if accelerator is None:
            return
        for call in _scope_nodes(scope.node):
            if not (isinstance(call, ast.Call) and _called(call) in OUTPUTS):
                continue
            statement = self.model.index.statement_of_small(_statement_of(scope.node, call))
            if statement is None or not self.model.processes.runs_on_every_process(statement):
                continue
            if _under_local_test(self.values, scope, scope.node, call):
                continue
            for item in _item_calls(call):
                tensor = item.func.value
                if id(tensor) in self.reduced_nodes:
                    continue
                self.reduced_nodes.add(id(tensor))
                if LOCAL not in self.values.extents(tensor, scope):
                    continue
                if not _loss_like(scope.node, tensor):
                    continue
                quote = _free_quote(self.model.source, scope.node, tensor)
                self.edits.replace(
                    tensor,
                    lambda text, _r, a=accelerator, q=quote: (
                        f"{a}.reduce({text}.detach(), {q}mean{q})"
                    ),
                )


def _accelerator_in(values: PerProcessValues, scope: Scope) -> str | None:
    """The code naming the accelerator where `scope` runs: a name bound to `Accelerator(...)`
    that it sees, or `self.accelerator` in a method of a class that binds it."""
    current: Scope | None = scope
    while current is not None:
        if current.kind == "class":
            for method in current.children:
                for name, bindings in method.bindings.items():
                    if name.startswith("self.") and any(
                        b.value is not None and "accelerator" in values.roles(b.value, method)
                        for b in bindings
                    ):
                        return name
        else:
            for name, bindings in current.bindings.items():
                if "." in name:
                    continue
                if any(
                    b.value is not None and "accelerator" in values.roles(b.value, current)
                    for b in bindings
                ):
                    return name
        current = current.parent
    return None


def _running_sums(loop: Loop) -> dict[str, list[ast.AugAssign]]:
    found: dict[str, list[ast.AugAssign]] = {}
    for node in _own_nodes(loop.node):
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Add)
            and isinstance(node.target, ast.Name)
        ):
            found.setdefault(node.target.id, []).append(node)
    first = {name: min((n.lineno, n.col_offset) for n in nodes) for name, nodes in found.items()}
    return {name: found[name] for name in sorted(found, key=first.get)}  # in source order


def _zeroed_before(block: Block, position: int, name: str) -> bool:
    """`name = 0` (`0.0`, `torch.zeros(...)`, `torch.tensor(0.0)`) as one of the statements
    before the loop in its block, with no other binding of it between: a sum started afresh
    for this loop (a sum carrying a value in would count that value N times)."""
    for node in reversed(block.statements[:position]):
        smalls = node.body if isinstance(node, Line) else [node]
        for small in reversed(smalls):
            if not any(
                isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                for n in ast.walk(small)
            ):
                continue
            value = small.value if isinstance(small, (ast.Assign, ast.AnnAssign)) else None
            return _zero(value)
    return False


def _zero(value: ast.AST | None) -> bool:
    if isinstance(value, ast.Constant):
        return value.value == 0 and not isinstance(value.value, bool)
    if isinstance(value, ast.Call):
        called = _called(value)
        if called in ("zeros", "zeros_like"):
            return True
        if called in ("tensor", "as_tensor", "float", "int") and value.args:
            return _zero(value.args[0])
    return False


def _rebound_in(loop: ast.AST, name: str) -> bool:
    """Bound in the loop other than by `name += ...`."""
    for node in _own_nodes(loop):
        if isinstance(node, ast.AugAssign):
            continue
        targets = (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor))
            else []
        )  # fmt: skip
        for target in targets:
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                return True
    return False


def _reads_after(scope: Scope, loop: Loop, name: str) -> list[ast.Name]:
    end = loop.node.end_lineno
    inside = {id(n) for n in ast.walk(loop.node)}
    return [
        node
        for node in _scope_nodes(scope.node)
        if isinstance(node, ast.Name)
        and node.id == name
        and isinstance(node.ctx, ast.Load)
        and id(node) not in inside
        and node.lineno > end
    ]


COLLECTIVES = {
    "reduce",
    "gather",
    "gather_for_metrics",
    "all_reduce",
    "all_gather",
    "gather_object",
}


def _collective_argument(function: ast.AST, read: ast.Name) -> bool:
    """`read` is (inside) an argument of a gather or reduce."""
    node: ast.AST | None = read
    while node is not None and not isinstance(node, ast.stmt):
        node = _parent(function, node)
        if isinstance(node, ast.Call) and _called(node) in COLLECTIVES:
            return True
    return False


def _increment_kind(expr: ast.AST) -> str:
    """What one pass adds: a count of samples or a sum over them (`y.size(0)`, `len(y)`,
    `(pred == y).sum()`, `loss.item() * x.size(0)`, a loss with `reduction="sum"`), one
    (`steps += 1`), or a per-batch average (`loss.item()`, `acc.mean()`). Summed over the
    processes, the first is the whole data's; the second is not a count of data at all (each
    process makes as many passes as the original with split batches); the third is averaged
    over them."""
    if isinstance(expr, ast.Constant):
        return COUNTER
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            called = _called(node)
            if called in ("sum", "len", "count_nonzero", "numel") or (
                called == "size" and node.args
            ):
                return PER_SAMPLE
            if any(
                k.arg == "reduction"
                and isinstance(k.value, ast.Constant)
                and k.value.value == "sum"
                for k in node.keywords
            ):
                return PER_SAMPLE
        shape = node.value if isinstance(node, ast.Subscript) else None
        if isinstance(shape, ast.Attribute) and shape.attr == "shape":
            return PER_SAMPLE
    return PER_BATCH


def _free_quote(source, function: ast.AST, node: ast.AST) -> str:
    """The quote a string literal inside `node` can use: the other one than the f-string's
    that holds it, if any."""
    for outer in _scope_nodes(function):
        if isinstance(outer, ast.JoinedStr) and any(n is node for n in ast.walk(outer)):
            text = source.text_of(outer).lstrip("rRbBuUfF")
            return "'" if text.startswith('"') else '"'
    return '"'


def _number_like(expr: ast.AST, scope: Scope) -> bool:
    """A Python number per pass: `x.item()`, `float(...)`, `len(...)`, `x.size(0)`,
    `x.shape[0]`, a literal, or arithmetic on those."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.BinOp):
        return _number_like(expr.left, scope) and _number_like(expr.right, scope)
    if isinstance(expr, ast.UnaryOp):
        return _number_like(expr.operand, scope)
    if isinstance(expr, ast.Subscript):
        value = expr.value
        return isinstance(value, ast.Attribute) and value.attr == "shape"
    if isinstance(expr, ast.Call):
        called = _called(expr)
        if isinstance(expr.func, ast.Attribute):  # `t.float()` is a tensor still
            return called == "item" or (called == "size" and bool(expr.args))
        return called in ("float", "int", "len", "round")
    if isinstance(expr, ast.Name):
        bindings = scope.assigns(expr.id)
        return bool(bindings) and all(
            b.value is not None and not b.unpacked and _number_like(b.value, scope)
            for b in bindings
        )
    return False


def _loss_like(function: ast.AST, tensor: ast.AST) -> bool:
    """A name for a loss, bound to calls (`loss = criterion(out, y)`, `loss = model(batch)`
    of a model returning its loss) without `reduction=`: a mean over the batch, whose mean
    over the processes is the whole batch's."""
    if not isinstance(tensor, ast.Name):
        return False
    for node in _scope_nodes(function):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == tensor.id for t in node.targets
        ):
            value = node.value
            if not isinstance(value, (ast.Call, ast.BinOp, ast.Attribute, ast.Subscript)):
                return False  # `loss = outputs.loss`, `loss = out[0]` too
            if any(isinstance(k, ast.keyword) and k.arg == "reduction" for k in ast.walk(value)):
                return False  # `reduction="sum"` sums over this process's share
    return any(word in tensor.id.lower() for word in LOSS_WORDS)


def _item_calls(call: ast.Call) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(call)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "item"
        and not node.args
    ]


def _under_local_test(values: PerProcessValues, scope: Scope, loop: ast.AST, call) -> bool:
    """Is `call` inside an `if` of the loop whose test is this process's (not every process
    would reach the print, and a reduction there would wait forever)?"""
    return any(
        isinstance(node, (ast.If, ast.While))
        and any(c is call for c in ast.walk(node))
        and LOCAL in values.extents(node.test, scope)
        for node in _own_nodes(loop)
    )


def _statement_of(function: ast.AST, call: ast.AST) -> ast.stmt | None:
    for node in _scope_nodes(function):
        if (
            isinstance(node, ast.stmt)
            and not isinstance(node, _COMPOUND)
            and any(c is call for c in ast.walk(node))
        ):
            return node
    return None


_COMPOUND = (
    ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
    ast.AsyncFunctionDef, ast.ClassDef,
)  # fmt: skip


def _parent(function: ast.AST, child: ast.AST) -> ast.AST | None:
    for node in _scope_nodes(function):
        for inner in ast.iter_child_nodes(node):
            if inner is child:
                return node
    return None


def _called(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _own_nodes(node: ast.AST):
    """`node` and what it holds, not inside nested functions or classes."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                      ast.Lambda)):  # fmt: skip
                stack.append(child)


def _scope_nodes(function: ast.AST):
    for child in ast.iter_child_nodes(function):
        yield from _own_nodes(child)
