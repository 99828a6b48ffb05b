"""Which code of a file drives a step helper: a loop here, or something outside the file.

A function that runs backward() outside any loop is a step helper; when a loop of this file
(a function's or module-level) calls it, directly or through other functions, that loop is the
training loop. When only functions nothing here calls reach it (a Lightning-style
`training_step`, a mixed-precision helper's `backward` method), the loop that drives it is in
another module or a framework, and the file says so instead of staying silent.
"""

from __future__ import annotations

from collections.abc import Iterator

from migrator.analysis.model.origins import calls_of
from migrator.analysis.syntax.index import CallSite, ModuleIndex, Scope


def calls_reaching(index: ModuleIndex, function: Scope) -> Iterator[CallSite]:
    """The calls of this file that run `function`, directly or through other functions
    (each calling function followed once)."""
    pending, seen = [function], {id(function)}
    while pending:
        for caller in calls_of(index, pending.pop()):
            yield caller
            scope = caller.scope
            if scope.kind == "function" and id(scope) not in seen:
                seen.add(id(scope))
                pending.append(scope)


def driven_here(index: ModuleIndex, function: Scope) -> bool:
    """Whether a loop of this file (a function's, or module-level) calls `function`,
    directly or through other functions. A call from module-level code outside any loop
    (`main()` under `if __name__ == "__main__":` calling `demo(rank)` once) runs one step: no
    training loop drives it (reached_once says so)."""
    return any(caller.loop is not None for caller in calls_reaching(index, function))


def reached_once(index: ModuleIndex, function: Scope) -> bool:
    """Whether module-level code calls `function` (directly or through other functions),
    though no loop does: the step runs once, not in a loop another module drives."""
    return any(caller.scope.kind != "function" for caller in calls_reaching(index, function))


def undriven_callers(index: ModuleIndex, site: CallSite) -> str | None:
    """For a step in a function no loop here drives: the uncalled functions that reach it,
    joined for a message ("" when it has no caller in this file at all); None for
    module-level steps and steps in loops."""
    if site.loop is not None or site.scope.kind != "function":
        return None
    names: list[str] = []
    for caller in calls_reaching(index, site.scope):
        scope = caller.scope
        if (
            scope.kind == "function"
            and scope is not site.scope
            and not calls_of(index, scope)
            and scope.name not in names
        ):
            names.append(scope.name)
    return "()`, `".join(names)


def qualified_name(function: Scope) -> str:
    parent = function.parent
    if parent is not None and parent.kind == "class":
        return f"{parent.name}.{function.name}"
    return function.name
