"""Whether a branch taken on a per-process value can leave the processes out of step
(per_process.py's decisions): the branch runs collectives the other branch does not (CutMix's
`if r < p: out = model(mixed) else: out = model(x)` runs one forward either way), or leaves
(`break`, `continue`, `return`) code that runs one - the loop it leaves, the function it
returns from, with the functions of the program they call. A per-sample augmentation that returns early
(`if random.random() < p: return img`) leaves no collective behind: every process goes on
alike."""

from __future__ import annotations

import ast

from migrator.analysis.effects.values import PerProcessValues
from migrator.rules.running_sums import own_nodes
from migrator.soundness.model import OutputModel

COLLECTIVE_METHODS = {
    "gather", "gather_for_metrics", "reduce", "gather_object", "wait_for_everyone",
    "save_state", "prepare", "backward", "all_reduce", "barrier", "broadcast",
}  # fmt: skip
LOOPS = (ast.For, ast.AsyncFor, ast.While)
DEPTH = 3  # functions of the program followed this deep


class Leaving:
    def __init__(self, model: OutputModel, values: PerProcessValues) -> None:
        self.model = model
        self.values = values
        self.sites = {id(site.node): site for site in model.index.calls()}
        self._syncing: dict[int, bool] = {}

    def out_of_step(self, scope, node: ast.If | ast.While) -> bool:
        """Can taking `node`'s branch on one process and not on another leave them out of
        step?"""
        branch = [*node.body, *node.orelse]
        taken, other = self._signature(node.body, scope), self._signature(node.orelse, scope)
        if (taken or other) and (taken != other or isinstance(node, ast.While)):
            return True  # `if r < p: out = model(mixed) else: out = model(x)`: one forward each
        for statement in branch:
            for inner in own_nodes(statement):
                if isinstance(inner, ast.Return) and self._syncs(scope.node.body, scope, 0):
                    return True
                if isinstance(inner, (ast.Break, ast.Continue)):
                    loop = _enclosing_loop(scope.node, inner)
                    if loop is None or self._syncs(loop.body, scope, 0):
                        return True
        return False

    def _signature(self, statements, scope) -> list[str]:
        """The collectives `statements` run, in order (a prepared model's forward as
        "forward", a program function that syncs as "call"): two branches with one signature
        keep the processes in step whichever each takes."""
        found = []
        for statement in statements:
            for node in sorted(
                (n for n in own_nodes(statement) if isinstance(n, ast.Call)),
                key=lambda n: (n.lineno, n.col_offset),
            ):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in COLLECTIVE_METHODS:
                    found.append(func.attr)
                elif self.values.runs_model(node, scope):
                    found.append("forward")
                elif self._syncs_call(node, 0):
                    found.append("call")
        return found

    def _syncs_call(self, node: ast.Call, depth: int) -> bool:
        site = self.sites.get(id(node))
        callee = self.model.graph.callee(site) if site is not None else None
        return callee is not None and depth < DEPTH and self._function_syncs(callee, depth)

    def _syncs(self, statements, scope, depth: int) -> bool:
        for statement in statements:
            for node in own_nodes(statement):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in COLLECTIVE_METHODS:
                    return True
                if self.values.runs_model(node, scope):
                    return True  # a prepared model's forward syncs its buffers
                if self._syncs_call(node, depth):
                    return True
        return False

    def _function_syncs(self, function, depth: int) -> bool:
        key = id(function)
        if key not in self._syncing:
            self._syncing[key] = False  # a recursive call adds nothing
            body = getattr(function.node, "body", [])
            self._syncing[key] = self._syncs(body, function, depth + 1)
        return self._syncing[key]


def _enclosing_loop(function: ast.AST, leave: ast.AST) -> ast.AST | None:
    """The innermost loop of `function`'s own code holding `leave`."""
    found = None
    for node in own_nodes(function):
        holds = isinstance(node, LOOPS) and any(n is leave for n in own_nodes(node))
        if holds and (found is None or any(n is node for n in own_nodes(found))):
            found = node
    return found
