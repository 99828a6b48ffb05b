"""Training loops: which loops run a backward and step an optimizer over a loader.

What a loop draws its batches from (`LoopSource`) is read through the wrappers real scripts put
around a loader: `enumerate`, `tqdm`, `iter`, `islice`, `zip(a, b)`, MetricLogger's
`log_every(loader, ...)`, a same-file generator that yields the items of its argument
(`def cycle(dl): while True: yield from dl`), names bound to any of these wherever the binding
is (`progress_bar = tqdm(loader)`), and `next(it)` inside a `while True:` / `for i in range(n)`
loop with `it = iter(loader)` (minGPT). The loader is what gets prepared; the wrappers stay.

A mixin of the analyser (roles.py): it reads `self.index`, `self.imports`, `self.facts`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

from migrator.analysis import patterns
from migrator.analysis.drivers import (
    driven_here,
    qualified_name,
    reached_once,
    undriven_callers,
)
from migrator.analysis.facts import (
    argument_for,
    call_sites_of,
    class_methods,
    is_method,
    value_call,
)
from migrator.analysis.imports import dotted_name
from migrator.analysis.index import (
    CallSite,
    Line,
    Loop,
    Scope,
    Statement,
    reaching_binding,
    target_names,
)
from migrator.analysis.instances import called_method


@dataclass(eq=False)
class LoopSource:
    """The loaders a loop draws batches from, as names seen from `scope`."""

    scope: Scope
    loaders: list[str]
    through_enumerate: bool = False  # the loop's first target is a counter
    batches: set[str] | None = None  # bound from `next(it)`; None: the loop's own targets
    batch_statements: set[int] = field(default_factory=set)  # ids of `batch = next(it)`
    inline: ast.Call | None = None  # `enumerate(DataLoader(ds, ...))`: the loader has no name


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
                if sibling.name == method:
                    return sibling
        return None

    # -- what a loop iterates ----------------------------------------------------------------
    def _loop_source(self, loop: Loop) -> LoopSource | None:
        key = id(loop)
        if key not in self._sources:
            self._sources[key] = self._find_loop_source(loop)
        return self._sources[key]

    def _find_loop_source(self, loop: Loop) -> LoopSource | None:
        if loop.iter is not None:
            found = self._unwrap(loop.iter, loop.scope, frozenset(), loop.statement)
            if found is not None:
                return found
        return self._iterator_source(loop)

    def _unwrap(
        self, expr: ast.expr, scope: Scope, seen: frozenset, at: Statement | None = None
    ) -> LoopSource | None:
        """The loaders whose items `expr` yields (None: not a loader's items we can name);
        `at`: the statement that reads `expr` (a loop's head)."""
        through = False
        while isinstance(expr, ast.Call):
            if patterns.is_loader_call(expr, self.imports):  # built in place: named by MIG006
                return LoopSource(scope, [], through, inline=expr)
            inner = self._wrapped(expr, scope)
            if not inner:
                return None
            if self.imports.qualify(expr.func) in ("enumerate", "tqdm.contrib.tenumerate"):
                through = True
            if len(inner) > 1:  # zip(a, b): every argument is a loader
                parts = [self._unwrap(e, scope, seen) for e in inner]
                if any(p is None or p.scope is not parts[0].scope or p.inline for p in parts):
                    return None
                return LoopSource(parts[0].scope, [n for p in parts for n in p.loaders], through)
            expr = inner[0]
        name = patterns.name_of(expr)
        if name is None:
            return None
        bound = self._wrapper_binding(scope, name, seen, at)
        if bound is NOT_LOADER_ITEMS:
            return None
        if bound is not None:
            bound.through_enumerate = bound.through_enumerate or through
            return bound
        return LoopSource(scope, [name], through)

    def _wrapper_binding(self, scope: Scope, name: str, seen: frozenset, at=None):
        """`progress_bar = tqdm(loader)` / `it = iter(loader)`: what the name wraps, read where
        it is bound (every binding must wrap the same loaders, or the one just before `at` in
        its block reaches it: `t = tqdm(train_loader)` then `for b in t:`, later
        `t = tqdm(val_loader)`). NOT_LOADER_ITEMS: every binding wraps an iterable that is no
        loader (`pbar = tqdm(range(epochs))`)."""
        origin = self.facts.origin(scope, name)
        if origin is None or (id(origin.scope), origin.name) in seen:
            return None
        bindings = origin.scope.assigns(origin.name)
        if not bindings or any(b.kind != "assign" or b.unpacked for b in bindings):
            return None
        reaching = reaching_binding(bindings, at) if origin.scope is scope else None
        if reaching is not None and len(bindings) > 1:
            bindings = [reaching]
        seen = seen | {(id(origin.scope), origin.name)}
        found: list[LoopSource] = []
        for binding in bindings:
            value = binding.value
            if not isinstance(value, ast.Call) or not self._wrapped(value, origin.scope):
                return None
            source = self._unwrap(value, origin.scope, seen)
            if source is None:
                return NOT_LOADER_ITEMS if len(found) == 0 and len(bindings) == 1 else None
            found.append(source)
        first = found[0]
        if any(f.scope is not first.scope or f.loaders != first.loaders for f in found):
            return None
        return first

    def _wrapped(self, call: ast.Call, scope: Scope) -> list[ast.expr] | None:
        """The arguments whose items `call` yields, if it is a wrapper of iterables."""
        callee = self.imports.qualify(call.func)
        args = patterns.call_args(call)
        if callee in patterns.ZIP_WRAPPERS:
            if not args or any(not a.plain for a in args):
                return None
            return [a.value for a in args]
        attribute = call.func.attr if isinstance(call.func, ast.Attribute) else None
        if callee in patterns.ITEM_WRAPPERS or attribute in patterns.ITEM_WRAPPER_METHODS:
            first = args[0] if args else None
            if first is not None and (first.plain or first.keyword == "iterable"):
                return [first.value]
            return None
        for function in self._item_generators(call):
            param = self._yielded_param(function)
            argument = argument_for(call, function, param) if param is not None else None
            if argument is not None:
                return [argument]
        return None

    def _item_generators(self, call: ast.Call) -> list[Scope]:
        """Functions of this module `call` may run, by name (`cycle(dl)`, `logger.log(dl)`)."""
        if isinstance(call.func, ast.Name):
            found = self.index.functions.get(call.func.id)
            return [found] if found is not None else []
        if isinstance(call.func, ast.Attribute):
            return [s for s in self.index.scopes if s.kind == "function" and is_method(s)
                    and s.name == call.func.attr]  # fmt: skip
        return []

    def _yielded_param(self, function: Scope) -> str | None:
        """The parameter a generator yields the items of: `for x in param: ... yield ...` or
        `yield from param` (`def cycle(dl): while True: for b in dl: yield b`)."""
        params = [p for p in function.params if not p.startswith("*")]
        if not isinstance(function.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        for node in ast.walk(function.node):
            if isinstance(node, ast.YieldFrom):
                name = patterns.name_value(node.value)
                if name in params:
                    return name
            if isinstance(node, (ast.For, ast.AsyncFor)):
                name = patterns.name_value(_strip_enumerate(node.iter))
                if name in params and any(isinstance(n, ast.Yield) for n in ast.walk(node)):
                    return name
        return None

    def _iterator_source(self, loop: Loop) -> LoopSource | None:
        """`batch = next(it)` inside the loop, `it` an iterator over a loader."""
        found: LoopSource | None = None
        for call in loop.calls:
            if call.scope is not loop.scope or self.imports.qualify(call.node.func) != "next":
                continue
            args = patterns.call_args(call.node)
            if not args or not args[0].plain:
                continue
            source = self._unwrap(args[0].value, loop.scope, frozenset())
            if source is None or not self._is_iterator(args[0].value, loop.scope):
                continue
            if any(self._is_iterator(ast.Name(id=n), source.scope) for n in source.loaders):
                continue  # an iterator over something this file cannot name
            batches = set()
            small = call.small
            if isinstance(small, ast.Assign) and small.value is call.node:
                for target in small.targets:
                    batches.update(name for name, _ in target_names(target))
            if found is None:
                found = LoopSource(source.scope, list(source.loaders), False, batches,
                                   inline=source.inline)  # fmt: skip
            elif source.scope is found.scope and source.inline is None:
                found.loaders += [n for n in source.loaders if n not in found.loaders]
                found.batches |= batches
            if found.scope is source.scope:
                found.batch_statements.add(id(small))
        return found

    def _is_iterator(self, expr: ast.expr, scope: Scope) -> bool:
        """`iter(...)`, a generator call, or a name bound to one: `next()` can draw from it."""
        if isinstance(expr, ast.Call):
            return self.imports.qualify(expr.func) == "iter" or any(
                self._yielded_param(f) is not None for f in self._item_generators(expr)
            )
        name = patterns.name_of(expr)
        origin = self.facts.origin(scope, name) if name is not None else None
        if origin is None:
            return False
        bindings = origin.scope.assigns(origin.name)
        return bool(bindings) and all(
            b.value is not None and self._is_iterator(b.value, origin.scope) for b in bindings
        )

    def _inline_statement(self, loop, source):
        """Where a DataLoader built in place gets its name: before the loop, or before the
        binding of the wrapper the loop draws from (`it = cycle(DataLoader(...))`)."""
        for statement in [loop.statement, *(b.statement for bs in source.scope.bindings.values()
                                             for b in bs)]:  # fmt: skip
            node = statement.node
            parts = node.body if isinstance(node, Line) else [
                node.iter if isinstance(node, ast.For) else node]  # fmt: skip
            if any(inner is source.inline for part in parts for inner in ast.walk(part)):
                return statement if statement.block.kind != "suite" else None
        return None

    # -- training loops ----------------------------------------------------------------------
    def _batch_loop_for(self, loop: Loop | None) -> Loop | None:
        while loop is not None:
            if self._loop_source(loop) is not None:
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
            if site.method == "backward" and callers is not None:
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


def _strip_enumerate(expr: ast.expr) -> ast.expr:
    while isinstance(expr, ast.Call) and patterns.name_value(expr.func) in ("enumerate", "iter"):
        if not expr.args:
            break
        expr = expr.args[0]
    return expr


# `_wrapper_binding`: a name bound to a wrapper of something that is not a loader
NOT_LOADER_ITEMS = LoopSource(None, [], False)  # type: ignore[arg-type]
