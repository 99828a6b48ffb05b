"""Training loops: which loops run a backward and step an optimizer over a loader.

A mixin of the analyser (roles.py): it reads `self.index`, `self.imports`, `self.facts`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from migrator.analysis import patterns
from migrator.analysis.facts import call_sites_of, class_methods, is_method
from migrator.analysis.index import CallSite, Loop, Scope


class LoopAnalysis:
    def _backward_sites(self) -> list[CallSite]:
        sites = []
        for site in self.index.calls():
            if site.method != "backward" or site.receiver is None:
                continue
            qualified = self.imports.qualify(site.receiver) or ""
            if qualified in ("torch.autograd", "autograd"):
                continue
            sites.append(site)
        return sites

    def _backward_functions(self, sites: list[CallSite]) -> set[int]:
        """ids of function scopes that run a backward, directly or through calls."""
        found = {id(site.scope) for site in sites if site.scope.kind == "function"}
        changed = True
        while changed:
            changed = False
            for scope in self.index.scopes:
                if scope.kind != "function" or id(scope) in found:
                    continue
                if any(self._callee_scope(c) is not None and id(self._callee_scope(c)) in found
                       for c in scope.calls):  # fmt: skip
                    found.add(id(scope))
                    changed = True
        self._backward_function_ids = found
        return found

    def _callee_scope(self, site: CallSite) -> Scope | None:
        """The function of this module a call runs (by name, or a sibling method)."""
        key = id(site)
        if key not in self._callees:
            self._callees[key] = self._find_callee_scope(site)
        return self._callees[key]

    def _find_callee_scope(self, site: CallSite) -> Scope | None:
        func = site.node.func
        if isinstance(func, ast.Name):
            return self.index.functions.get(func.id)
        name = patterns.name_of(func)
        if name is not None and "." in name and is_method(site.scope):  # `self.train_epoch()`
            method = name.split(".", 1)[1]
            for sibling in class_methods(site.scope):
                if sibling.name == method:
                    return sibling
        return None

    # -- training loops ----------------------------------------------------------------------
    def _batch_loop_for(self, loop: Loop | None) -> Loop | None:
        while loop is not None:
            name, _ = patterns.loader_base(loop.iter, self.imports)
            if name is not None:
                return loop
            loop = loop.parent
        return None

    def _find_training_loops(self, sites: list[CallSite], backward_functions: set[int]) -> None:
        events: list[CallSite] = list(sites)
        events += [
            c for c in self.index.calls()
            if self._callee_scope(c) is not None and id(self._callee_scope(c)) in backward_functions
        ]  # fmt: skip
        loops: list[Loop] = []
        own_loop_functions = set()
        for site in events:
            loop = self._batch_loop_for(site.loop)
            if loop is not None and self._steps_optimizer(loop):
                if loop not in loops:
                    loops.append(loop)
                own_loop_functions.add(id(site.scope))
        for site in events:
            if self._batch_loop_for(site.loop) is not None:
                continue
            callee = self._callee_scope(site)
            if callee is not None and id(callee) in own_loop_functions:
                continue  # the helper trains over its own loop
            if site.scope.kind == "function" and call_sites_of(self.index, site.scope):
                continue  # a per-batch step helper: its caller's loop is the training loop
            steps_here = any(c.method == "step" for c in self._calls_reachable(site.scope.calls))
            if site.method == "backward" and steps_here and not self._is_accelerator_receiver(site):
                self._finding(
                    site.node,
                    "MIG905",
                    "backward() outside a loop over a DataLoader; migrate this step by hand",
                    level="note",
                )
        self.facts.training_loops = loops

    def _steps_optimizer(self, loop: Loop) -> bool:
        for call in self._calls_reachable(loop.calls):
            if call.method == "step":
                return True
        return False

    def _calls_reachable(self, calls: Iterable[CallSite]) -> list[CallSite]:
        """`calls` plus every call inside module functions they call, transitively."""
        result, queue, seen = [], list(calls), set()
        while queue:
            call = queue.pop()
            if id(call) in seen:
                continue
            seen.add(id(call))
            result.append(call)
            callee = self._callee_scope(call)
            if callee is not None and id(callee) not in seen:
                seen.add(id(callee))
                queue.extend(callee.calls)
        return result

    def _per_batch_functions(self) -> set[int]:
        """ids of functions called (transitively) from inside a training loop."""
        found: set[int] = set()
        for loop in self.facts.training_loops:
            for call in self._calls_reachable(loop.calls):
                callee = self._callee_scope(call)
                if callee is not None:
                    found.add(id(callee))
        return found

    def _in_training(self, site: CallSite, per_batch: set[int]) -> bool:
        if id(site.scope) in per_batch:
            return True
        return any(loop.contains(site.loop) for loop in self.facts.training_loops)

    # -- owner and roles ---------------------------------------------------------------------
