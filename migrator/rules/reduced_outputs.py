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

from migrator.analysis.catalogue.outputs import module_function, shows
from migrator.analysis.effects.extents import LOCAL
from migrator.analysis.effects.values import PerProcessValues
from migrator.analysis.syntax.index import Loop, Scope, Statement
from migrator.edits import EditSet, NewStatement
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.padded_batches import drops_last, training_padding_note
from migrator.rules.running_sums import (
    COUNTER,
    called_name,
    collective_argument,
    increment_kind,
    loss_like,
    number_like,
    own_nodes,
    reads_after,
    reads_itself,
    rebound_in,
    restarted_window,
    running_sums,
    scope_nodes,
    statement_of,
    zeroed_before,
)
from migrator.rules.sum_reductions import SumReduction

KEPT = {"update", "set_postfix"}  # kept to show: a meter's `update`, a progress bar's postfix
TRACKED = {"add_scalar", "log_metric"}  # a tracker's one value: `writer.add_scalar(tag, x, step)`
OUTPUTS = {"print", "info", "debug", "warning", "log", "append", *KEPT, *TRACKED}
MAIN_PROCESS_TESTS = {"is_main_process", "is_local_main_process"}


class ReducedOutputs(Rule):
    code = "MIG032"
    name = "per-process-outputs"
    summary = "running sums and printed losses of per-process data reduced over the processes"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        """Nothing on the input: `reduce_outputs` runs on the migrated text."""


def reduce_outputs(model, target_torch: str = "torch") -> tuple[EditSet, list[Finding], bool]:
    """The edits that reduce the per-process values of the migrated module `model`
    (soundness.model.OutputModel), its notes on what it reduced, and whether `torch` is read by
    the new code. The running sums reduced are kept on `model.reduced_sums`: (the loop's first
    and last line, the sum's name)."""
    values = model.values()
    pass_ = _Pass(model, values, target_torch)
    for scope in model.index.scopes:
        for loop in scope.loops:
            if not model.processes.runs_on_every_process(loop.statement):
                continue
            source = pass_.prepared_source(loop)
            if source is not None:
                pass_.reduce_sums(loop, source)
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
        self.guard_means: dict[tuple[int, str], str] = {}
        self.taken: set[str] | None = None

    def prepared_source(self, loop: Loop) -> ast.expr | None:
        """The prepared loader (or iterator) `loop` draws its batches from (directly, through a
        wrapper, or with `next(...)` on an iterator over one), where it draws only from
        prepared ones; else None. A loop some calls run over a plain loader (one epoch function
        for training and evaluation) would count that loader's whole set once per process if
        its sums were reduced."""
        scope = loop.scope
        node = loop.node

        parameters = _parameters(scope.node)

        def prepared(expr: ast.AST) -> bool:
            roles = self.values.roles(expr, scope)
            mixed = isinstance(expr, ast.Name) and expr.id in parameters and "plainloader" in roles
            return bool(roles & {"loader", "iterator"}) and not mixed

        if isinstance(node, (ast.For, ast.AsyncFor)):
            iterable = node.iter
            while isinstance(iterable, ast.Call):  # `enumerate(tqdm(loader), 1)`: the loader
                inner = next((a for a in iterable.args if prepared(a)), None)
                if inner is None:
                    break
                iterable = inner
            if prepared(iterable):
                return iterable
        for inner in own_nodes(node):
            nexted = isinstance(inner, ast.Call) and called_name(inner) == "next" and inner.args
            if nexted and prepared(inner.args[0]):
                return inner.args[0]
        return None

    # -- running sums ----------------------------------------------------------------------------
    def reduce_sums(self, loop: Loop, source: ast.expr) -> None:
        """The running sums of `loop`, which draws from the prepared `source`."""
        scope = loop.scope
        accelerator = _accelerator_in(self.values, scope)
        if accelerator is None or loop.statement.block.kind == "suite":
            return
        sums = running_sums(loop)
        reductions = SumReduction(self.values, self.model.index.imports, scope, loop, sums)
        reduced: list[str] = []
        for name, increments in sums.items():
            key = (id(loop.node), name)
            started = _started_around(loop.statement, name)
            if key in self.reduced or started is None:
                continue
            block, position = started.block, started.index
            window = None
            if started is not loop.statement:  # in a `with`: reduced after it, read after it
                if rebound_in(loop.node, name) or any(
                    r.lineno <= started.node.end_lineno for r in reads_after(scope, loop, name)
                ):
                    continue
            elif rebound_in(loop.node, name):
                window = self._window(loop, name)
                if window is None:
                    continue  # not a plain running sum, nor one restarted every few passes
            if not any(LOCAL in self.values.extents(i.value, scope) for i in increments):
                continue
            if any(reads_itself(i.value, name) for i in increments):
                continue  # `mean += (x - mean) / (i + 1)`: a running mean, not a sum
            reads = window[1] if window else reads_after(scope, loop, name)
            if not reads or not any(LOCAL in self.values.extents(r, scope) for r in reads):
                continue
            if any(collective_argument(scope.node, r) for r in reads):
                continue  # the program reduces or gathers it itself
            kinds = {increment_kind(i.value) for i in increments}
            if kinds == {COUNTER} or len(kinds) != 1:
                continue  # this process's passes: as many as the original's with split batches
            reduction = reductions.of(name, increments, reads, window is not None)
            if reduction is None:
                continue  # read in a way no one reduction makes right: its note stays
            if all(number_like(i.value, scope) for i in increments):
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

            where = (window[0].block, window[0].index) if window else (block, position + 1)
            self.edits.insert(*where, NewStatement(code), priority=30)
            self.reduced.add(key)
            reduced.append(name)
            self.model.reduced_sums.append((loop.node.lineno, loop.node.end_lineno, name))
        if not reduced:
            return
        loader = self.model.source.text_of(source)
        tree, imports = self.model.index.module_scope.node, self.model.index.imports
        if not drops_last(tree, imports, loader):
            self.notes.append(training_padding_note(loop.node, loader, reduced))

    def _window(self, loop: Loop, name: str) -> tuple[Statement, list[ast.Name]] | None:
        """A sum shown and restarted in an `if` of the loop that every process reaches alike
        (`if step % 10 == 0:`): the statement holding its first read there, where it is
        reduced, and its reads. Not after the loop: a last, partial window stays as it is."""
        found = restarted_window(loop.node, name)
        if found is None or reads_after(loop.scope, loop, name):
            return None
        window, reads = found
        if LOCAL in self.values.extents(window.test, loop.scope):
            return None  # not every process would reach the reduction
        first = min(reads, key=lambda r: (r.lineno, r.col_offset))
        small = statement_of(loop.scope.node, first)
        statement = self.model.index.statement_of_small(small) if small is not None else None
        if statement is None or statement.block.kind == "suite":
            return None
        if statement.block.owner is not window or statement.block.field != "body":
            return None  # read deeper inside the `if`
        if not self.model.processes.runs_on_every_process(statement):
            return None
        return statement, reads

    # -- printed losses ------------------------------------------------------------------------
    def reduce_printed_losses(self, scope: Scope) -> None:
        """`print(f"... {loss.item()}")` of this process's loss, where every process reaches
        the print: the mean over the processes (the whole batch's loss)."""
        accelerator = _accelerator_in(self.values, scope)
        if accelerator is None:
            return
        for call in scope_nodes(scope.node):
            if not (isinstance(call, ast.Call) and called_name(call) in OUTPUTS):
                continue
            imports = self.model.index.imports
            if module_function(call, imports) and not shows(call, imports):
                continue  # `torch.log(...)`: a module's function computes, it shows nothing
            statement = self.model.index.statement_of_small(statement_of(scope.node, call))
            if statement is None:
                continue
            guard = None  # `if accelerator.is_main_process: wandb.log(...)`, reduced before it
            if not self.model.processes.runs_on_every_process(statement):
                guard = self._main_process_guard(statement, call)
                if guard is None:
                    continue
            if _under_local_test(self.values, scope, scope.node, call, guard):
                continue
            if called_name(call) in KEPT and self._other_local_arguments(call, scope):
                continue  # `meter.update(loss.item(), x.size(0))`: its count stays this process's
            for item in _item_calls(call):
                tensor = item.func.value
                if id(tensor) in self.reduced_nodes:
                    continue
                self.reduced_nodes.add(id(tensor))
                if LOCAL not in self.values.extents(tensor, scope):
                    continue
                if not loss_like(scope.node, tensor):
                    continue
                if guard is not None:
                    self._reduce_before(guard, tensor, accelerator)
                    continue
                quote = _free_quote(self.model.source, scope.node, tensor)
                self.edits.replace(
                    tensor,
                    lambda text, _r, a=accelerator, q=quote: (
                        f"{a}.reduce({text}.detach(), {q}mean{q})"
                    ),
                )

    def _main_process_guard(self, statement: Statement, call: ast.Call) -> Statement | None:
        """The `if accelerator.is_main_process:` around `statement` (in its body), where the
        `if` itself runs on every process in a block of its own: a reduction placed right
        before it is reached by every process alike. None for any other shape."""
        enclosing = statement.chain()[:-1]
        for outer in reversed(enclosing):
            if not self.model.processes.runs_on_every_process(outer):
                continue
            node = outer.node
            if not isinstance(node, ast.If) or outer.block.kind == "suite":
                return None
            inside = any(c is call for item in node.body for c in ast.walk(item))
            return outer if inside and _tests_main_process(node.test) else None
        return None

    def _reduce_before(self, guard: Statement, tensor: ast.Name, accelerator: str) -> None:
        """`loss_mean = accelerator.reduce(loss.detach(), "mean")` before the guard (once per
        guard and tensor); the shown `loss.item()` reads `loss_mean`. `loss` itself is left,
        so the sums and steps that read it after stay this process's as the rules made them."""
        key = (id(guard.node), tensor.id)
        name = self.guard_means.get(key)
        if name is None:
            name = self._fresh_name(f"{tensor.id}_mean")
            self.guard_means[key] = name
            code = f'{name} = {accelerator}.reduce({tensor.id}.detach(), "mean")\n'
            self.edits.insert(guard.block, guard.index, NewStatement(code), priority=30)
        self.edits.replace(tensor, lambda _text, _r, n=name: n)

    def _fresh_name(self, base: str) -> str:
        if self.taken is None:
            tree = self.model.index.module_scope.node
            self.taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            self.taken |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        name, count = base, 1
        while name in self.taken:
            count += 1
            name = f"{base}_{count}"
        self.taken.add(name)
        return name

    def _other_local_arguments(self, call: ast.Call, scope: Scope) -> bool:
        """An argument of `call` holding no `.item()` is this process's own (a count)."""
        arguments = [*call.args, *(k.value for k in call.keywords)]
        return any(not _item_calls(a) and LOCAL in self.values.extents(a, scope) for a in arguments)


def _started_around(statement: Statement, name: str) -> Statement | None:
    """The statement after which the running sum `name` of the loop at `statement` is whole:
    the loop itself where `name` is zeroed before it in its block, or the `with` around it
    (`with tqdm(total=n) as bar:`, `with torch.no_grad():`, nested) in whose block it is.
    None where it is started nowhere there."""
    while not zeroed_before(statement.block, statement.index, name):
        owner = statement.block.parent
        if owner is None or not isinstance(owner.node, (ast.With, ast.AsyncWith)):
            return None
        if owner.block.kind == "suite":
            return None
        statement = owner
    return statement


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


def _free_quote(source, function: ast.AST, node: ast.AST) -> str:
    """The quote a string literal inside `node` can use: the other one than the f-string's
    that holds it, if any."""
    for outer in scope_nodes(function):
        if isinstance(outer, ast.JoinedStr) and any(n is node for n in ast.walk(outer)):
            text = source.text_of(outer).lstrip("rRbBuUfF")
            return "'" if text.startswith('"') else '"'
    return '"'


def _item_calls(call: ast.Call) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(call)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "item"
        and not node.args
    ]


def _under_local_test(values: PerProcessValues, scope: Scope, loop: ast.AST, call, guard) -> bool:
    """Is `call` inside an `if` of the loop whose test is this process's (not every process
    would reach the print, and a reduction there would wait forever)? The main-process
    `guard` the reduction is placed before aside."""
    skipped = guard.node if guard is not None else None
    return any(
        isinstance(node, (ast.If, ast.While))
        and node is not skipped
        and any(c is call for c in ast.walk(node))
        and LOCAL in values.extents(node.test, scope)
        for node in own_nodes(loop)
    )


def _tests_main_process(test: ast.expr) -> bool:
    """`accelerator.is_main_process`, `self.accelerator.is_local_main_process`, alone."""
    return isinstance(test, ast.Attribute) and test.attr in MAIN_PROCESS_TESTS


def _parameters(node: ast.AST) -> set[str]:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    arguments = node.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return {a.arg for a in every}
