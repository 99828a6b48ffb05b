"""What MIG032 reads of a loop on the migrated text: its running sums (`total += ...`, zeroed
before the loop in its block, not rebound in it), what one pass adds to each (a count or sum
over samples, a count of passes, a per-batch average), whether that is a Python number, and
where the sum is read after the loop; and the small `ast` walks those need."""

from __future__ import annotations

import ast

from migrator.analysis.syntax.index import Block, Line, Loop, Scope

PER_SAMPLE, PER_BATCH, COUNTER = "per sample", "per batch", "counter"
LOSS_WORDS = ("loss", "criterion", "entropy")


def running_sums(loop: Loop) -> dict[str, list[ast.AugAssign]]:
    found: dict[str, list[ast.AugAssign]] = {}
    for node in own_nodes(loop.node):
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Add)
            and isinstance(node.target, ast.Name)
        ):
            found.setdefault(node.target.id, []).append(node)
    first = {name: min((n.lineno, n.col_offset) for n in nodes) for name, nodes in found.items()}
    return {name: found[name] for name in sorted(found, key=first.get)}  # in source order


def reads_itself(value: ast.AST, name: str) -> bool:
    """Does an increment of `name` read `name`? Then it holds no sum (a running mean `m += (x
    - m) / (i + 1)`, a decayed average), and a sum over the processes is N times it."""
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value))


def zeroed_before(block: Block, position: int, name: str) -> bool:
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
            return _zero(_value_of(small, value, name))
    return False


def _value_of(statement: ast.AST, value: ast.AST | None, name: str) -> ast.AST | None:
    """The part of `value` bound to `name`: `total, count = 0.0, 0` binds `count` to 0."""
    targets = statement.targets if isinstance(statement, ast.Assign) else []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            if len(target.elts) == len(value.elts):
                for element, part in zip(target.elts, value.elts):
                    if isinstance(element, ast.Name) and element.id == name:
                        return part
            return None
    return value


def _zero(value: ast.AST | None) -> bool:
    if isinstance(value, ast.Constant):
        return value.value == 0 and not isinstance(value.value, bool)
    if isinstance(value, ast.Call):
        called = called_name(value)
        if called in ("zeros", "zeros_like"):
            return True
        if called in ("tensor", "as_tensor", "float", "int") and value.args:
            return _zero(value.args[0])
    return False


def rebound_in(loop: ast.AST, name: str) -> bool:
    """Bound in the loop other than by `name += ...`."""
    for node in own_nodes(loop):
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


def restarted_window(loop: ast.AST, name: str) -> tuple[ast.If, list[ast.Name]] | None:
    """A sum shown and restarted every few passes (`if step % 100 == 99: print(running / 100);
    running = 0.0`, PyTorch's CIFAR tutorial): its only other bindings in the loop are zeros
    in one `if` directly in the loop's body, and every read of it in the loop is in that
    `if`'s body before them. Returns the `if` and those reads."""
    resets, reads = [], []
    for node in own_nodes(loop):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            reads.append(node)
        if isinstance(node, ast.AugAssign):
            continue
        targets = (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor))
            else []
        )  # fmt: skip
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                return None
            if not _zero(_value_of(node, node.value, name)):  # `running, seen = 0.0, 0` too
                return None
            resets.append(node)
    body = getattr(loop, "body", [])
    windows = [n for n in body if isinstance(n, ast.If) and any(r in n.body for r in resets)]
    if not resets or not reads or len(windows) != 1:
        return None
    window = windows[0]
    first_reset = min(r.lineno for r in resets)
    inside = {id(n) for part in window.body for n in ast.walk(part)}
    if not all(r in window.body for r in resets) or any(
        id(r) not in inside or r.lineno > first_reset for r in reads
    ):
        return None
    return window, reads


def reads_after(scope: Scope, loop: Loop, name: str) -> list[ast.Name]:
    end = loop.node.end_lineno
    inside = {id(n) for n in ast.walk(loop.node)}
    return [
        node
        for node in scope_nodes(scope.node)
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


def collective_argument(function: ast.AST, read: ast.Name) -> bool:
    """`read` is (inside) an argument of a gather or reduce."""
    node: ast.AST | None = read
    while node is not None and not isinstance(node, ast.stmt):
        node = parent_of(function, node)
        if isinstance(node, ast.Call) and called_name(node) in COLLECTIVES:
            return True
    return False


def increment_kind(expr: ast.AST) -> str:
    """What one pass adds: a count of samples or a sum over them (`y.size(0)`, `len(y)`,
    `(pred == y).sum()`, `loss.item() * x.size(0)`, a loss with `reduction="sum"`), one
    (`steps += 1`), or a per-batch average (`loss.item()`, `acc.mean()`). Summed over the
    processes, the first is the whole data's; the second is not a count of data at all (each
    process makes as many passes as the original with split batches); the third is averaged
    over them."""
    if isinstance(expr, ast.Constant):
        return COUNTER
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div):
        # `loss.item() / len(loader)`: what is divided says what is added, the divisor
        # (a count of batches or samples) only scales it
        return increment_kind(expr.left)
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            called = called_name(node)
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


def number_like(expr: ast.AST, scope: Scope) -> bool:
    """A Python number per pass: `x.item()`, `float(...)`, `len(...)`, `x.size(0)`,
    `x.shape[0]`, a literal, or arithmetic on those."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.BinOp):
        return number_like(expr.left, scope) and number_like(expr.right, scope)
    if isinstance(expr, ast.UnaryOp):
        return number_like(expr.operand, scope)
    if isinstance(expr, ast.Subscript):
        value = expr.value
        return isinstance(value, ast.Attribute) and value.attr == "shape"
    if isinstance(expr, ast.Call):
        called = called_name(expr)
        if isinstance(expr.func, ast.Attribute):  # `t.float()` is a tensor still
            return called == "item" or (called == "size" and bool(expr.args))
        return called in ("float", "int", "len", "round")
    if isinstance(expr, ast.Name):
        bindings = scope.assigns(expr.id)
        return bool(bindings) and all(
            b.value is not None and not b.unpacked and number_like(b.value, scope) for b in bindings
        )
    return False


def loss_like(function: ast.AST, tensor: ast.AST) -> bool:
    """A name for a loss, bound to calls (`loss = criterion(out, y)`, `loss = model(batch)`
    of a model returning its loss) without `reduction=`: a mean over the batch, whose mean
    over the processes is the whole batch's."""
    if not isinstance(tensor, ast.Name):
        return False
    for node in scope_nodes(function):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == tensor.id for t in node.targets
        ):
            value = node.value
            if not isinstance(value, (ast.Call, ast.BinOp, ast.Attribute, ast.Subscript)):
                return False  # `loss = outputs.loss`, `loss = out[0]` too
            if any(isinstance(k, ast.keyword) and k.arg == "reduction" for k in ast.walk(value)):
                return False  # `reduction="sum"` sums over this process's share
    return any(word in tensor.id.lower() for word in LOSS_WORDS)


def statement_of(function: ast.AST, call: ast.AST) -> ast.stmt | None:
    for node in scope_nodes(function):
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


def parent_of(function: ast.AST, child: ast.AST) -> ast.AST | None:
    for node in scope_nodes(function):
        for inner in ast.iter_child_nodes(node):
            if inner is child:
                return node
    return None


def called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def own_nodes(node: ast.AST):
    """`node` and what it holds, not inside nested functions or classes."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                      ast.Lambda)):  # fmt: skip
                stack.append(child)


def scope_nodes(function: ast.AST):
    for child in ast.iter_child_nodes(function):
        yield from own_nodes(child)
