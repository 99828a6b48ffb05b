"""Training loops: which loops run a backward and step an optimizer over a loader.

What a loop draws its batches from (`LoopSource`, through the wrappers real scripts put around
a loader) is loop_sources.py; here: which loops train, the notes for steps no loader loop
drives, and which calls run per batch.

A mixin of the analyser (roles.py): it reads `self.index`, `self.imports`, `self.facts`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.classes import method_of, override, overrides
from migrator.analysis.model.driver_loops import driver_loops
from migrator.analysis.model.drivers import (
    driven_here,
    qualified_name,
    reached_once,
    undriven_callers,
)
from migrator.analysis.model.instances import called_method, instance_method
from migrator.analysis.model.loop_sources import LoopSources
from migrator.analysis.model.origins import (
    OWN_WORK,
    call_sites_of,
    class_methods,
    is_method,
    value_call,
)
from migrator.analysis.roles.shared_epochs import SharedEpochs
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import (
    CallSite,
    Loop,
    Scope,
)


class LoopAnalysis(LoopSources, SharedEpochs):
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
        return found

    def _callee_scope(self, site: CallSite) -> Scope | None:
        """The function of this module a call runs (by name, or a sibling method)."""
        key = id(site)
        if key not in self._callees:
            self._callees[key] = self._find_callee_scope(site)
        return self._callees[key]

    def _called_instance(self, method: Scope) -> bool:
        """Whether `method` is a `__call__` that a call of an instance runs (a loss scaler)."""
        return method.name == "__call__" and any(
            self._callee_scope(call) is method for call in self.index.calls()
        )

    def _find_callee_scope(self, site: CallSite) -> Scope | None:
        func = site.node.func
        if isinstance(func, ast.Name):
            found = self.index.functions.get(func.id)
            if found is None:  # `loss_scaler(loss, optimizer)`: an instance's `__call__`
                found = called_method(self.index, site.scope, func.id, "__call__")
            return found
        dotted = dotted_name(func)
        if dotted in self.index.aliases:  # `engine.train_one_epoch(...)` in a joined program
            return self.index.functions.get(dotted)
        name = patterns.name_of(func)
        if name is not None and "." in name and is_method(site.scope):  # `self.train_epoch()`
            method = name.split(".", 1)[1]
            for sibling in class_methods(site.scope):
                if sibling.name == method:  # a base's stub: the one subclass overriding it
                    return override(self.index, sibling) or sibling
            inherited = method_of(self.index, site.scope.parent, method)  # a base's method
            if inherited is not None:
                return inherited
        if (  # `trainer.train_step(img, ...)` on an instance of a class of the program
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id != patterns.SELF
            and func.attr not in OWN_WORK
            and not func.attr.startswith("__")
        ):
            return instance_method(self.index, site.scope, func.value.id, func.attr)
        return None

    # -- what a loop iterates ----------------------------------------------------------------
    def _batch_loop_for(self, loop: Loop | None) -> Loop | None:
        while loop is not None:
            if self._loop_source(loop) is not None:
                return loop
            loop = loop.parent
        return None

    def _stepping_batch_loop(self, loop: Loop | None) -> Loop | None:
        """The innermost loop around `loop` (itself included) that draws batches and steps an
        optimizer: an accumulation loop (`for _ in range(k): loss = model(next(it))`) inside
        the step loop draws, the loop around it steps."""
        while loop is not None:
            if self._loop_source(loop) is not None and self._steps_optimizer(loop):
                return loop
            loop = loop.parent
        return None

    def _find_training_loops(self, sites: list[CallSite], backward_functions: set[int]) -> None:
        events: list[CallSite] = list(sites)
        events += [
            c for c in self.index.calls()
            if self._callee_scope(c) is not None and id(self._callee_scope(c)) in backward_functions
        ]  # fmt: skip
        self.facts.step_sites = list(events)
        steps = [(loop, site) for site in events
                 if (loop := self._stepping_batch_loop(site.loop)) is not None]  # fmt: skip
        drivers = driver_loops(steps, self._callee_scope, self._reachable_functions)
        loops: list[Loop] = []
        own_loop_functions = set()
        for loop, site in steps:
            if id(loop) not in drivers and loop not in loops:
                loops.append(loop)
            own_loop_functions.add(id(site.scope))
        # Steps with no loader loop: only where a plain backward runs (a file whose every
        # backward is `accelerator.backward` is migrated already).
        plain = [site for site in sites if not self._is_accelerator_receiver(site)]
        plain_ids = {id(site) for site in plain}
        plain_functions = self._backward_functions(plain)
        events = [site for site in events if id(site) in plain_ids or (
            self._callee_scope(site) is not None
            and id(self._callee_scope(site)) in plain_functions)]  # fmt: skip
        notes: list[tuple[CallSite, Scope | None]] = []
        for site in events:
            if self._batch_loop_for(site.loop) is not None:
                continue
            callee = self._callee_scope(site)
            if callee is not None and (
                site.loop is None or own_loop_functions & self._reachable_functions(callee)
            ):
                continue  # a call outside any loop, or into a helper training over its own loop
            if (
                site.loop is None
                and site.scope.kind == "function"
                and (driven_here(self.index, site.scope) or self._called_instance(site.scope))
            ):
                continue  # a step helper without a loop: its caller's loop is the training loop
            if self._steps_nearby(site):
                notes.append((site, callee))
        noted = {id(site.scope) for site, _ in notes}
        notes = [(site, callee) for site, callee in notes
                 if callee is None or not noted & self._reachable_functions(callee)]  # fmt: skip
        loaderless = self._loaderless_loops(notes) if not loops else []
        if loaderless:
            self.facts.loaderless = True
            notes = []
        for site, callee in notes:
            callers = undriven_callers(self.index, site)
            if callers is not None and reached_once(self.index, site.scope):
                callers = None  # `demo(rank)` called once from main(): one step, no loop
            stepped = _stepped_with(self.index, site.scope) if callers == "" else None
            if site.method == "backward" and stepped is not None:
                message = (
                    f"backward() in `{qualified_name(site.scope)}()`, which "
                    f"`{ast.unparse(stepped.node)}` (line {stepped.node.lineno}) runs: "
                    "a closure step on data no DataLoader shards, so N processes would train "
                    "N replicas of the model on the same data; migrate this step by hand"
                )
            elif site.method == "backward" and callers is not None:
                reached = f", reached from `{callers}()`," if callers else ","
                message = (
                    f"backward() in `{qualified_name(site.scope)}()`{reached} which nothing in this "
                    "file calls: the loop that drives it is elsewhere (another module, a "
                    "framework's trainer); migrate this step with that loop, by hand"
                )
            elif site.method == "backward":
                message = "backward() outside a loop over a DataLoader; migrate this step by hand"
            else:
                name = patterns.name_of(site.node.func) or "this call"
                message = (
                    f"`{name}()` runs backward() and an optimizer step (line "
                    f"{callee.node.lineno}) in a loop that does not draw from a DataLoader; "
                    "migrate this step by hand"
                )
            self._finding(site.node, "MIG905", message, level="note")
        self.facts.training_loops = loops or loaderless

    def _loaderless_loops(self, notes: list[tuple[CallSite, Scope | None]]) -> list[Loop]:
        """Loader-less training (nanoGPT's `get_batch`, full-batch graph models): the loop
        around each reported step that also steps the optimizer, if every step has one."""
        found: list[Loop] = []
        for site, _callee in notes:
            loops = [site.loop, *site.loop.ancestors()] if site.loop is not None else []
            loop = next((loop for loop in loops if self._steps_optimizer(loop)), None)
            if loop is None:
                return []  # a closure stepped by `optimizer.step(closure)`: by hand
            if loop not in found:
                found.append(loop)
        return found

    def _own_step(self, call: CallSite) -> bool:
        """`self.step(x, y)`, `ema.step()`: a method of a class of the program that is no
        optimizer (its bases name none), whose body is followed like any other call."""
        callee = self._callee_scope(call)
        if callee is None or callee.parent is None or callee.parent.kind != "class":
            return False
        bases = [dotted_name(base) or "" for base in callee.parent.node.bases]
        return not any("optim" in base.lower() for base in bases)

    def _named_stepper(self, origin) -> bool:
        """In loader-less training, only what is built or named as an optimizer or scheduler
        steps like one (`env.step(action)` in reinforcement learning does not)."""
        for binding in origin.scope.assigns(origin.name):
            call = value_call(binding)
            if call is not None and (
                patterns.is_optimizer_call(call, self.imports)
                or patterns.is_scheduler_call(call, self.imports)
            ):
                return True
        lowered = origin.name.rsplit(".", 1)[-1].lower()
        return "optim" in lowered or lowered.startswith("opt") or "sched" in lowered

    def _loaderless_no_model(self) -> str:
        loop = self.facts.training_loops[0]
        return (
            f"the training loop at line {loop.node.lineno} draws no batches from a DataLoader "
            f"and `{self.facts.optimizers[0]}` trains no model this file makes (it optimises "
            "tensors); there is nothing for DDP to wrap; migrate this step by hand"
        )

    def _reachable_functions(self, function: Scope) -> set[int]:
        found = {id(function)}
        for call in self._calls_reachable(function.calls):
            callee = self._callee_scope(call)
            if callee is not None:
                found.add(id(callee))
        return found

    def _steps_nearby(self, site: CallSite) -> bool:
        """An optimizer steps around this backward (or call into one): in its loop, else in its
        scope, or, for a closure (`optimizer.step(closure)`), in the functions around it."""
        if site.loop is not None:
            return any(self._steps_optimizer(loop) for loop in [site.loop, *site.loop.ancestors()])
        scope: Scope | None = site.scope
        while scope is not None and scope.kind != "class":
            if any(c.method == "step" for c in self._calls_reachable(scope.calls)):
                return True
            if scope.kind != "function" or call_sites_of(self.index, scope):
                return False
            scope = scope.parent
        if scope is None:
            return False
        # an uncalled method of a helper class whose sibling method steps the optimizer
        # (a mixed-precision trainer's `backward` and `optimize`)
        methods = [child for child in scope.children if child.kind == "function"]
        return any(c.method == "step" for m in methods for c in self._calls_reachable(m.calls))

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
            # a base's stub several trainers override (`self.calculate_loss(batch)`): any runs
            for target in [callee, *overrides(self.index, callee)] if callee is not None else []:
                if id(target) not in seen:
                    seen.add(id(target))
                    queue.extend(target.calls)
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


def _stepped_with(index, function: Scope):
    """The call `optimizer.step(closure)` that is handed `function` (LBFGS's closure: the
    optimizer calls it), where nothing calls it by name; None otherwise."""
    return next(
        (site for site in index.calls()
         if site.method == "step"
         and any(isinstance(a, ast.Name) and a.id == function.name for a in site.node.args)),
        None,
    )  # fmt: skip
