"""What the original script's source shows about its loss, read with `ast` (no torch).

Only what is visible in the file itself: a loss built in an imported module is not seen, which
is why the loss-scale cause is decided from the recorded losses and only confirmed here.
"""

from __future__ import annotations

import ast
import re

NO_GRAD = {"no_grad", "inference_mode"}
LOSS_NAME = re.compile(r"loss|kld|kl_|bce|mse|nll|err|cost", re.IGNORECASE)


def summed_losses(text: str) -> list[str]:
    """Where the script sums a loss over the batch: `line N: what`, in source order.

    Found: `reduction="sum"` and the legacy `size_average=False` on any call (torch's losses
    and functional losses), and a loss-named assignment whose value sums with `.sum()` or
    `torch.sum(...)` (a per-sample loss summed by hand, a VAE's KL term). Not counted: code
    under `torch.no_grad()` / `torch.inference_mode()` and values read with `.item()`, where
    no backward can follow (an evaluation's `test_loss += F.nll_loss(..., reduction="sum")
    .item()`).
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found: dict[int, str] = {}
    for node in _trained_nodes(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if _is_constant(keyword.value, "sum") and keyword.arg == "reduction":
                    found.setdefault(node.lineno, f"{_callee(node)}(reduction='sum')")
                elif _is_constant(keyword.value, False) and keyword.arg == "size_average":
                    found.setdefault(node.lineno, f"{_callee(node)}(size_average=False)")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [_target_name(target) for target in targets]
            if any(name and LOSS_NAME.search(name) for name in names) and _sums(node.value):
                found.setdefault(node.lineno, f"{names[0]} = ... sum(...)")
    return [f"line {line}: {what}" for line, what in sorted(found.items())]


def _trained_nodes(tree: ast.AST):
    """Every node except those under a no-grad block or read with `.item()`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
            _callee(item.context_expr) in NO_GRAD
            for item in node.items
            if isinstance(item.context_expr, ast.Call)
        ):
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "item"
        ):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _is_constant(node: ast.expr, value) -> bool:
    return (
        isinstance(node, ast.Constant) and type(node.value) is type(value) and node.value == value
    )


def _callee(call: ast.Call) -> str:
    function = call.func
    if isinstance(function, ast.Attribute):
        return function.attr
    if isinstance(function, ast.Name):
        return function.id
    return "call"


def _target_name(target: ast.expr) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def _sums(value: ast.expr) -> bool:
    """Whether the expression sums with `.sum()` / `torch.sum(...)`, not as the numerator of a
    division (`x.sum() / len(x)` is a mean) nor on a comparison (`(pred == y).sum()` counts
    correct answers)."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Div):
        return _sums(value.right)
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "sum"
        and not isinstance(value.func.value, ast.Compare)
    ):
        return True
    return any(_sums(child) for child in ast.iter_child_nodes(value) if isinstance(child, ast.expr))


SCHEDULER_CALL = re.compile(r"LR$|Scheduler|lr_scheduler|_schedule", re.IGNORECASE)


def prepared_epoch_schedulers(text: str) -> list[str]:
    """Schedulers the migrated script prepares but steps outside the optimizer's loop.

    verify runs the migrated script with split batches, where a prepared scheduler advances
    once per `step()` call, as the original does; a real N-process run (split_batches=False)
    advances it N times per call, which is right for a per-step scheduler and wrong for one
    stepped per epoch. The comparison cannot show that, so it is read from the source: a name
    passed to `accelerator.prepare(...)` that is bound to a scheduler (`StepLR(...)`,
    `lr_scheduler.X(...)`, `get_*_schedule*(...)`) and whose `.step()` is not inside the
    innermost loop that steps an optimizer. Nothing is reported when the Accelerator is made
    with `split_batches=True` or `step_scheduler_with_optimizer=False`.
    Returns `line N: name` for each such `step()` call, in source order.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    prepared: set[str] = set()
    schedulers: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _callee(node) == "Accelerator":
            for keyword in node.keywords:
                if (keyword.arg == "split_batches" and _is_constant(keyword.value, True)) or (
                    keyword.arg == "step_scheduler_with_optimizer"
                    and _is_constant(keyword.value, False)
                ):
                    return []
        if isinstance(node, ast.Call) and _callee(node) == "prepare":
            prepared.update(ast.unparse(argument) for argument in node.args)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            called = ast.unparse(node.value.func)
            if SCHEDULER_CALL.search(called):
                schedulers.update(ast.unparse(target) for target in node.targets)
    watched = prepared & schedulers
    if not watched:
        return []
    steps: list[tuple[str, int, tuple[int, ...]]] = []
    _collect_steps(tree, (), steps)
    optimizer_loops = [loops for name, _, loops in steps if name not in schedulers and loops]
    if not optimizer_loops:
        return []
    innermost = max(optimizer_loops, key=len)[-1]
    return [
        f"line {line}: {name}"
        for name, line, loops in sorted(steps, key=lambda step: step[1])
        if name in watched and innermost not in loops
    ]


def _collect_steps(node: ast.AST, loops: tuple[int, ...], steps: list) -> None:
    """Every `X.step(...)` call with the ids of the loops around it (outermost first)."""
    for child in ast.iter_child_nodes(node):
        inner = loops
        if isinstance(child, (ast.For, ast.AsyncFor, ast.While)):
            inner = (*loops, id(child))
        if (
            isinstance(child, ast.Call)
            and isinstance(child.func, ast.Attribute)
            and child.func.attr == "step"
        ):
            steps.append((ast.unparse(child.func.value), child.lineno, loops))
        _collect_steps(child, inner, steps)
