"""MIG031's per-batch values that are not batch tensors: a Python number
(`psnr = 10 * log10(1 / mse.item())`) or a 0-d tensor per batch (`loss = criterion(out, y)`).
`gather_for_metrics` of either is wrong on N processes (a list of floats, or N values where
`.item()` wants one), so MIG031 all-reduces them, and these helpers tell what they are and
which reduction keeps the 1-process result.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.host_scores import host_score
from migrator.analysis.catalogue.patterns import LOSS_NAME, name_of
from migrator.analysis.syntax.index import Block, Loop, Scope
from migrator.rules.base import RuleContext


class PerBatchValues:
    """Which names of an eval loop hold a Python number or a 0-d tensor per batch."""

    def __init__(self, context: RuleContext) -> None:
        self.context = context
        self.numbers: set[str] = set()  # per-process names holding a Python number
        self.scalars: set[str] = set()  # per-process names holding a per-batch 0-d tensor
        self.local: set[str] = set()  # the names still per-process where a value is bound

    def forget(self, names) -> None:
        self.numbers.difference_update(names)
        self.scalars.difference_update(names)

    def bind(self, names, value: ast.AST | None, local: set[str] | None = None) -> None:
        """`names` were bound to `value`, which reads per-process data. A model that returns
        its losses (`score_loss, box_loss = model.eval().forward(x, s, b)`) returns one per
        batch, as a criterion does. `local`: the names still per-process there (a setting
        beside a loss, `lam * loss_a + (1 - lam) * loss_b`, is no batch data)."""
        self.local = local if local is not None else set()
        if self.is_number(value):
            self.numbers.update(names)
        elif isinstance(value, ast.Call) and self._returns_numbers(value, names):
            self.numbers.update(names)  # `batch_loss, correct = test_step(x, y)`
        elif self.is_scalar_tensor(value) or (
            isinstance(value, ast.Call) and names and all(LOSS_NAME.search(n) for n in names)
        ):
            self.scalars.update(names)

    def __contains__(self, name: str) -> bool:
        return name in self.numbers or name in self.scalars

    def _returns_numbers(self, call: ast.Call, names) -> bool:
        """Does `call`, a function of this file, return only Python numbers where `names`
        are bound (`return loss.item(), correct` with `correct = (...).sum().item()`)?
        Gathered, a number per batch comes back as a list (or N of them, unpacked wrong)."""
        function = self.context.facts.index.functions.get(name_of(call.func) or "")
        if function is None:
            return False
        returns = [n.value for n in ast.walk(function.node) if isinstance(n, ast.Return)]
        if not returns or any(r is None for r in returns):
            return False
        own = PerBatchValues(self.context)
        for _ in range(2):  # names bound to numbers, then names bound to those
            for name, bindings in function.bindings.items():
                if bindings and all(b.value is not None and not b.unpacked
                                    and own.is_number(b.value) for b in bindings):  # fmt: skip
                    own.numbers.add(name)
        parts = [e for r in returns for e in (r.elts if isinstance(r, ast.Tuple) else [r])]
        return len(names) > 0 and all(own.is_number(part) for part in parts)

    def is_scalar_tensor(self, expr: ast.AST | None) -> bool:
        """Does `expr` compute one tensor value per batch: a loss (`criterion(out, y)`,
        `F.mse_loss(...)`, `loss_fn(...)`), `x.mean()` / `x.sum()` without a dimension, or
        arithmetic on those and numbers?"""
        if isinstance(expr, ast.Name):
            return expr.id in self.scalars
        if isinstance(expr, ast.BinOp):
            sides = (expr.left, expr.right)
            return any(self.is_scalar_tensor(side) for side in sides) and all(
                self.is_scalar_tensor(side)
                or self.is_number(side)
                or self._setting(side)
                or _count(side)  # `sum(torch.eq(pred, y)) / len(pred)`
                for side in sides
            )
        if not isinstance(expr, ast.Call):
            return False
        func = expr.func
        if isinstance(func, ast.Name) and func.id == "sum" and len(expr.args) == 1:
            return True  # `sum(torch.eq(pred, y))`: summed over the batch, no sample's own
        if self.context.facts.index.imports.qualify(func) in ("torch.sum", "torch.mean") and (
            len(expr.args) == 1 and not expr.keywords
        ):
            return True
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("mean", "sum")
            and not (expr.args or expr.keywords)
        ):
            return True
        called = getattr(func, "attr", None) or getattr(func, "id", None) or ""
        called = called.lower()
        reduction = next((k.value for k in expr.keywords if k.arg == "reduction"), None)
        if isinstance(reduction, ast.Constant) and reduction.value == "none":
            return False
        return any(word in called for word in ("loss", "criterion", "entropy")) or (
            called == "kl_div"
        )

    def _setting(self, expr: ast.AST) -> bool:
        """An expression that reads no per-process name (`lam`, `1 - lam`, `args.alpha`)."""
        return not any(
            isinstance(node, ast.Name) and node.id in self.local for node in ast.walk(expr)
        )

    def is_number(self, expr: ast.AST | None) -> bool:
        """Does `expr` compute a Python number: `x.item()`, `float(...)`, a `math` function,
        or arithmetic on those, literals and names already holding one?"""
        if isinstance(expr, ast.Constant):
            return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
        if isinstance(expr, ast.Name):
            return expr.id in self.numbers
        if isinstance(expr, ast.UnaryOp):
            return self.is_number(expr.operand)
        if isinstance(expr, ast.BinOp):
            sides = (expr.left, expr.right)
            return any(self.is_number(s) and not isinstance(s, ast.Constant) for s in sides) and (
                all(self.is_number(s) or _count(s) for s in sides)
            )
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr == "item" and not expr.args:
                return True
            callee = self.context.facts.index.imports.qualify(func) or ""
            return (
                callee in ("float", "int", "round")
                or callee.startswith("math.")
                or host_score(callee, expr)
            )
        return False


def _count(expr: ast.AST) -> bool:
    """A setting or a size beside a number (`loss.item() / args.batch_size`, `loss.item() *
    x.size(0)`, `len(batch)`, `x.shape[0]`, `y.numel()`): a number too."""
    if isinstance(expr, ast.Attribute):
        return isinstance(expr.value, ast.Name) or _count(expr.value)
    if isinstance(expr, ast.Subscript):
        return isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape"
    if isinstance(expr, ast.Call):
        func = expr.func
        return (
            (isinstance(func, ast.Attribute) and func.attr == "size" and bool(expr.args))
            or (isinstance(func, ast.Attribute) and func.attr in ("numel", "nelement"))
            or (isinstance(func, ast.Name) and func.id == "len")
        )
    return False


def averaged_per_batch(
    context: RuleContext, scope: Scope, loop: Loop, accumulator: str | None
) -> bool:
    """Is `accumulator` divided by `len(<a loader>)`, by a name the loop adds 1 to, or by
    the loop's `enumerate` index plus one (`test_loss / (batch_idx + 1)`)?"""
    counters = {
        name
        for name, bindings in scope.bindings.items()
        for b in bindings
        if isinstance(b.small, ast.AugAssign)
        and isinstance(b.small.op, ast.Add)
        and isinstance(b.small.value, ast.Constant)
        and b.small.value.value == 1
        and loop.contains(b.loop)
    }
    for node in ast.walk(scope.node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = node.left, node.right
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div):
            left, right = node.target, node.value
        else:
            continue
        if name_of(_as_number(left)) != accumulator:
            continue
        if name_of(right) in counters or _counted_from_zero(right, _enumerate_index(loop)):
            return True
        if (
            isinstance(right, ast.Call)
            and name_of(right.func) == "len"
            and len(right.args) == 1
            and _counts_batches(context, scope, loop, name_of(right.args[0]) or "")
        ):
            return True
    return False


def _as_number(expr: ast.AST) -> ast.AST:
    """`total.detach().cpu().numpy()`, `total.item()`, `float(total)`: `total`, read."""
    while isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in SAME_VALUE and not expr.args:
            expr = func.value
        elif isinstance(func, ast.Name) and func.id in ("float", "int") and len(expr.args) == 1:
            expr = expr.args[0]
        else:
            break
    return expr


SAME_VALUE = {"item", "detach", "cpu", "float", "double", "numpy", "tolist"}


def _counts_batches(context: RuleContext, scope: Scope, loop: Loop, name: str) -> bool:
    """`len(name)` is this process's number of batches: `name` is a loader, or what the loop
    iterates (`bar = tqdm(loader)`; `for i, x in enumerate(bar)`)."""
    if context.role(scope, name) == "loader":
        return True
    source = getattr(loop.node, "iter", None)
    while isinstance(source, ast.Call) and source.args:  # `enumerate(tqdm(loader))`
        if name_of(source) == name:
            break
        source = source.args[0]
    if name_of(source) != name:
        return False
    bindings = scope.assigns(name)
    return bool(bindings) and all(
        b.value is not None and any(
            context.role(scope, name_of(arg) or "") == "loader"
            for arg in getattr(b.value, "args", [])[:1]
        )
        for b in bindings
    )  # fmt: skip


def _enumerate_index(loop: Loop) -> str | None:
    """`i` of `for i, batch in enumerate(loader):`."""
    node = loop.node
    target, source = getattr(node, "target", None), getattr(node, "iter", None)
    if (
        isinstance(source, ast.Call)
        and name_of(source.func) == "enumerate"
        and isinstance(target, ast.Tuple)
        and target.elts
        and isinstance(target.elts[0], ast.Name)
    ):
        return target.elts[0].id
    return None


def _counted_from_zero(expr: ast.AST, index: str | None) -> bool:
    return (
        index is not None
        and isinstance(expr, ast.BinOp)
        and isinstance(expr.op, ast.Add)
        and name_of(expr.left) == index
        and isinstance(expr.right, ast.Constant)
        and expr.right.value == 1
    )


COLLECTION_CALLS = {"set", "frozenset"}


def is_collection(expr: ast.AST | None) -> bool:
    """A Python set per batch (`set(get_entities(...))`): `gather_for_metrics` cannot
    concatenate it (on N processes it is a list of N of them), and merged sets of spans from
    different processes would match spans of different samples."""
    if isinstance(expr, (ast.Set, ast.SetComp)):
        return True
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in COLLECTION_CALLS
    )


def itemised_names(exprs: list) -> set[str]:
    """Names read as `name.item()`: each holds one value per batch (a loss from a model's
    outputs, `loss, logits = outputs[:2]`), to be reduced, never gathered."""
    return {
        node.func.value.id
        for expr in exprs
        for node in ast.walk(expr)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "item"
        and not node.args
        and isinstance(node.func.value, ast.Name)
    }


def read_after(loop: Loop, small: ast.stmt, names: list[str], metric) -> tuple[str, int] | None:
    """The first of `names` (or of a value computed from them after `small`) that a statement
    of `loop` after `small`, other than a metric statement (`metric(statement)` is not None)
    or an assignment, reads: code that still wants this process's batch
    (`save_image(recon.view(batch_size, ...))`), which a gather in place would break. A value
    computed from them that only metric statements read (`guess = logits.argmax(1)`) is
    fine: it is gathered with them."""
    watched = {name: name for name in names}  # name -> the gathered name it comes from
    statements = sorted(
        (
            node
            for node in ast.walk(loop.node)
            if isinstance(node, ast.stmt) and node.lineno > small.end_lineno
        ),
        key=lambda node: (node.lineno, node.col_offset),
    )
    for node in statements:
        if isinstance(node, (ast.AugAssign, ast.Expr)) and metric(node) is not None:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            read = [n.id for n in ast.walk(node.value or node) if isinstance(n, ast.Name)]
            sources = [watched[n] for n in read if n in watched]
            if sources:
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for bound in ast.walk(target):
                        if isinstance(bound, ast.Name):
                            watched[bound.id] = sources[0]
            continue
        parts = _own_expressions(node)
        for part in parts:
            for read in ast.walk(part):
                if isinstance(read, ast.Name) and read.id in watched:
                    return watched[read.id], read.lineno
    return None


def _own_expressions(node: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (a compound statement's test or
    iterable, not its body)."""
    if isinstance(node, (ast.If, ast.While)):
        return [node.test]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.iter]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in node.items]
    if isinstance(node, (ast.Try, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
        return []
    return [node]


def reduce_in_place(context: RuleContext, small: ast.AugAssign, reduction: str) -> bool:
    """`total += <one number per batch>` reduced where it stands, leaving the batch names
    per-process: `test_loss += loss_fn(out, x).item()` ->
    `test_loss += accelerator.reduce(loss_fn(out, x), "sum").item()`,
    `hits += len(a & b)` -> `hits += accelerator.reduce(torch.tensor(len(a & b), device=...),
    "sum").item()`. False when the value is not a number."""
    value = small.value
    accelerator = context.accelerator
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "item"
        and not value.args
    ):
        context.edits.replace(
            value.func.value,
            lambda text, _r: f'{accelerator}.reduce({text}, "{reduction}")',
        )
        return True
    if _counts(value):
        torch = context.torch_name()
        device = context.accelerator_expr("device")
        context.edits.replace(
            value,
            lambda text, _r: (
                f"{accelerator}.reduce({torch}.tensor({text}, device={device}), "
                f'"{reduction}").item()'
            ),
        )
        return True
    return False


def insert_reduction(
    context: RuleContext, block: Block, index: int, name: str, reduction: str, tensor: bool
) -> None:
    """`name = accelerator.reduce(name, "sum")` at `index` of `block`; a Python number goes
    through a tensor on the accelerator's device and back (`....reduce(torch.tensor(name,
    device=accelerator.device), "sum").item()`)."""
    accelerator = context.accelerator
    if tensor:
        code = f'{name} = {accelerator}.reduce({name}, "{reduction}")\n'
    else:
        torch = context.torch_name()
        device = context.accelerator_expr("device")
        code = (
            f"{name} = {accelerator}.reduce("
            f'{torch}.tensor({name}, device={device}), "{reduction}").item()\n'
        )
    context.edits.insert(block, index, context.statement(code), priority=20)


def _counts(expr: ast.AST) -> bool:
    """`len(x)`, `int(...)`, `float(...)`, or arithmetic on them and literals."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.BinOp):
        return _counts(expr.left) and _counts(expr.right)
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in ("len", "int", "float")
    )
