"""The note MIG031 leaves where it reduces a per-batch number over the processes: a prepared
loader evens out the end of its data (`even_batches`: the processes short of a batch repeat
samples from the start), and a number reduced batch by batch counts those repeats, which one
process never sees. `accelerator.gather_for_metrics` drops them, for the exact number.
MIG032 leaves the same note where it reduces a training loop's running sums: they count the
repeats too (a training loop cannot drop them: every process must take as many steps)."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.findings import Finding
from migrator.rules.base import RuleContext


def padding_note(context: RuleContext, loop, loader: str, names) -> None:
    shown = _listed(names)
    context.findings.append(Finding(code="MIG031", level="note", node=loop.node, message=(
        f"the per-batch numbers this loop reduces over the processes ({shown} first) are "
        "reduced batch by batch: where the size of "
        f"`{loader}`'s data is no multiple of N times its batch size, the prepared loader "
        "fills the last batches up with samples from the start of the data (`even_batches`), "
        "and they count here, which one process does not; for the exact number, gather "
        "per-sample values with `accelerator.gather_for_metrics` (it drops them)")))  # fmt: skip


def training_padding_note(loop: ast.AST, loader: str, names) -> Finding:
    """MIG032's note on the running sums it reduces after (or in) the training loop `loop`."""
    shown = _listed(names)
    return Finding(code="MIG032", level="note", node=loop, message=(
        f"the running sums reduced over the processes here ({shown}) count every batch the "
        f"processes drew: where the size of `{loader}`'s data is no multiple of N times its "
        "batch size (and the loader keeps its last batch, no `drop_last=True`), the prepared "
        "loader fills the last batches up with samples from the start of the data "
        "(`even_batches`, so that every process takes as many steps), and those samples count "
        "twice in the reduced numbers, which one process does not do"))  # fmt: skip


def drops_last(tree: ast.AST, imports, loader: str) -> bool:
    """Does `loader` drop its last, incomplete batch (`DataLoader(..., drop_last=True)`)? A
    prepared loader that does evens nothing out: it drops the last round of batches instead,
    and nothing counts twice. Read from the DataLoader calls of the module: those bound to
    `loader`'s name, else all of them (a loader handed over by a parameter, or made in a
    helper's `return DataLoader(...)`)."""
    made: list[tuple[str | None, bool]] = []
    bound: set[int] = set()
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and patterns.is_loader_call(node, imports)]  # fmt: skip
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(node.value is call for call in calls):
            bound.add(id(node.value))
            made += [(ast.unparse(t), _dropped(node.value)) for t in node.targets]
    made += [(None, _dropped(call)) for call in calls if id(call) not in bound]
    last = loader.rsplit(".", 1)[-1]
    named = [d for target, d in made
             if target is not None and (target == loader or target.rsplit(".", 1)[-1] == last)]  # fmt: skip
    found = named or [d for _target, d in made]
    return bool(found) and all(found)


def dropped_note(context: RuleContext, loop, loader: str) -> None:
    """MIG031's note where the evaluation loader drops its last batch: prepared, it drops the
    last round of batches that does not fill every process, more than the original skips."""
    context.findings.append(Finding(code="MIG031", level="note", node=loop.node, message=(
        f"`{loader}` drops its last incomplete batch (`drop_last=True`); prepared, it drops "
        "the last round of batches that does not give every process one (up to N - 1 whole "
        "batches more than the original skips), so the metrics gathered here may count fewer "
        "samples than one process does; keep `drop_last=False` on an evaluation loader for "
        "the whole set")))  # fmt: skip


def _dropped(call: ast.Call) -> bool:
    return any(
        k.arg == "drop_last" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )


def _listed(names) -> str:
    return ", ".join(f"`{name}`" for name in sorted(names))
