"""Outer driver loops: a loop that runs training only by calling a function that trains over a
loop of its own is a hyper-parameter sweep, a loop over folds or repeats, not a training loop.

`for width in widths: records.append(run_width(width, args))`, where `run_width()` makes the
loaders, model and optimizer and calls `train_one_epoch(model, train_loader, ...)`, reaches a
backward, and `widths` is a name like a loader's; but every training step it reaches runs in a
loop further down the call graph. The training loops are those; the sweep's iterable is no
loader, and the owner of training is the function where the objects meet (roles.py).
"""

from __future__ import annotations

from collections.abc import Callable

from migrator.analysis.syntax.index import CallSite, Loop


def driver_loops(
    steps: list[tuple[Loop, CallSite]],
    callee_of: Callable[[CallSite], object | None],
    reachable: Callable[[object], set[int]],
) -> set[int]:
    """ids of the loops among `steps` (each loop with a backward, or a call into a function
    that runs one, found in it) whose every such step is a call into a function that reaches
    another of these loops: those loops train, this one drives them."""
    loops: dict[int, Loop] = {}
    by_loop: dict[int, list[CallSite]] = {}
    for loop, site in steps:
        loops[id(loop)] = loop
        by_loop.setdefault(id(loop), []).append(site)
    drivers: set[int] = set()
    for key, sites in by_loop.items():
        others = {id(loop.scope) for other, loop in loops.items() if other != key}
        if all(_calls_into(site, others, callee_of, reachable) for site in sites):
            drivers.add(key)
    return drivers


def _calls_into(site: CallSite, scopes: set[int], callee_of, reachable) -> bool:
    callee = callee_of(site)
    return callee is not None and bool(reachable(callee) & scopes)
