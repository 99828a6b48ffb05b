"""What a name the training loop calls `.step()` (or only `.zero_grad()`) on is: an optimizer,
a scheduler (stepped per batch or per epoch), or a GradScaler whose `step(optimizer)` steps the
optimizer it is handed. Read from how each name is made, then from its name.

A mixin of roles._Analyser: it reads `self.facts`, `self.index` and `self.imports`.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.chains import chain_text
from migrator.analysis.model.origins import Origin, bindings_of, value_call
from migrator.analysis.roles.facts import SchedulerRole
from migrator.analysis.syntax.index import CallSite, Scope
from migrator.analysis.syntax.views import keyword_value

USER_SCHEDULES = {"LambdaLR", "MultiplicativeLR"}
KNOWN_SCHEDULE_MODULES = (
    "torch.optim.lr_scheduler.", "transformers.", "diffusers.", "timm.scheduler.",
)  # fmt: skip
STEP_COUNTED = (
    "steps in a loop bounded by a step count, which makes the original's number of steps on "
    "every process: prepared, it would step N times per step and run N times too fast"
)


def _reads(expr: ast.AST, name: str | None) -> bool:
    return name is not None and any(
        isinstance(node, ast.Name) and node.id == name for node in ast.walk(expr)
    )


class StepKinds:
    def _constructed_schedulers(self, owner, schedulers: list[str]) -> None:
        """Schedulers stepped outside the loop (per epoch), found by their constructor in the
        owner of training or the functions holding its objects; a value never stepped
        (`betas = get_beta_schedule(...)`, a noise schedule's tensor) is none."""
        facts = self.facts
        homes = {id(owner): owner} | {id(h): h for h in facts.homes.values()}
        stepped = {chain_text(s.receiver) for s in self.index.calls() if s.method == "step"}
        for scope in homes.values():
            for name, bindings in scope.bindings.items():
                calls = [value_call(b) for b in bindings if b.kind == "assign"]
                built = any(
                    call is not None and patterns.is_scheduler_call(call, self.imports)
                    for call in calls
                )
                if name not in schedulers and name in stepped and built:
                    schedulers.append(name)
                    if scope is not owner:
                        facts.homes.setdefault(name, scope)

    def _scaler_step_target(self, call: CallSite) -> Origin | None:
        """`scaler.step(optimizer)`: the optimizer is the argument."""
        args = patterns.call_args(call.node)
        argument = patterns.name_of(args[0].value) if args else None
        receiver_name = patterns.name_of(call.receiver)
        if argument is None or receiver_name is None:
            return None
        receiver = self.facts.origin(call.scope, receiver_name)
        if not self._is_scaler(receiver):
            return None
        return self.facts.origin(call.scope, argument)

    def _is_scaler(self, origin: Origin | None) -> bool:
        if origin is None:
            return False
        for binding in bindings_of(origin):
            call = value_call(binding)
            if call is not None and patterns.is_scaler_call(call, self.imports):
                return True
        return "scaler" in origin.name.lower()

    def _step_kind(self, origin: Origin, stepped: bool) -> str | None:
        """optimizer / scheduler / None for a name the loop calls `.step()` (stepped) or only
        `.zero_grad()` on. Modules have `zero_grad()` too: that alone never makes an optimizer."""
        built_by_unknown = False
        for binding in self._bindings(origin):
            call = value_call(binding)
            if call is None:
                continue
            if patterns.is_scaler_call(call, self.imports):
                return None
            if patterns.is_scheduler_call(call, self.imports):
                return "scheduler"
            if patterns.is_optimizer_call(call, self.imports):
                return "optimizer"
            built_by_unknown = True
        lowered = origin.name.rsplit(".", 1)[-1].lower()  # `self.cfg.optimiser`: `optimiser`
        if "scaler" in lowered:
            return None
        if "sched" in lowered:
            return "scheduler"
        if "optim" in lowered or lowered.startswith("opt"):
            return "optimizer"
        if stepped and not built_by_unknown:
            return "optimizer"
        if stepped and built_by_unknown:
            # `optimizer = build_optimizer(cfg, model)`: only a name stepping like one.
            return "optimizer" if not patterns.LOSS_NAME.search(lowered) else None
        return None

    def _schedulers(self, owner: Scope, stepped: list[str], per_batch: set[int]):
        roles = []
        for name in stepped:
            per_step = False
            counted = False
            for site in self.index.calls():
                if site.method != "step" or site.receiver is None:
                    continue
                home = self._home_of(name, owner)
                if self.facts.chain_origin(site.scope, site.receiver) != Origin(home, name):
                    continue
                if self._in_training(site, per_batch):
                    per_step = True
                    counted = counted or self._counted_in_steps(site, per_batch)
            bindings = self._home_of(name, owner).assigns(name)
            role = SchedulerRole(name, per_step, bindings[-1] if bindings else None)
            if per_step:
                role.plain = self._plain_schedule(bindings) or (STEP_COUNTED if counted else None)
            roles.append(role)
        return roles

    def _counted_in_steps(self, site: CallSite, per_batch: set[int]) -> bool:
        """Is the scheduler stepped in a training loop its step count bounds, rather than one
        pass over a loader: `for step in range(n): batch = next(it)`, a `while` around or
        instead of it (`while cur_itrs < total_itrs:`), or a `break` out of it? On N
        processes such a loop makes the same number of steps as the original, so a prepared
        scheduler (stepped N times per step) would run N times too fast."""
        loops = [loop for loop in self.facts.training_loops if loop.contains(site.loop)]
        if not loops and id(site.scope) in per_batch:
            loops = list(self.facts.training_loops)
        for loop in loops:
            source = self._loop_source(loop)
            if loop.iter is None or source is None or source.batches is not None:
                return True
            if any(outer.iter is None for outer in loop.ancestors()):
                return True
            if any(isinstance(node, ast.Break) for node in _own_statements(loop.node)):
                return True
        return False

    def _plain_schedule(self, bindings) -> str | None:
        """Why a per-step schedule must not be prepared: a function of the step count that
        fails past the original's end (`LambdaLR(opt, lambda s: table[s])`, `(1 - s / total)
        ** 0.9`), or a scheduler class of the program's own. A prepared scheduler steps N
        times per optimizer step (the loader is N times shorter), and with the last batch
        evened out it goes a few steps beyond the original's end."""
        for binding in bindings:
            call = value_call(binding)
            qualified = self.imports.qualify(call.func) if call is not None else None
            if qualified is None:
                return None
            last = qualified.rsplit(".", 1)[-1]
            overrun = self._schedule_overruns(call) if last in USER_SCHEDULES else None
            if overrun == UNREAD:
                return (
                    f"follows a function of the step count (`{last}`) this tool cannot read, "
                    "which may fail past the original's last step, where a prepared "
                    "scheduler would call it"
                )
            if overrun is not None:
                return (
                    f"follows a function of the step count (`{last}`) that fails past the "
                    "original's last step, where a prepared scheduler would call it"
                )
            if last not in USER_SCHEDULES and not qualified.startswith(KNOWN_SCHEDULE_MODULES):
                return (
                    f"is a `{last}`, not a scheduler known to stop at its end: prepared, it "
                    "would be stepped past the original's last step"
                )
        return None

    def _schedule_overruns(self, call: ast.Call) -> str | None:
        """Does the `lr_lambda` of a `LambdaLR` index a table or raise a difference to a
        power with the step ("overruns"), or is it a function this module cannot read
        (UNREAD)? A name bound once to a lambda (`lmbda = lambda epoch: 0.5`) is read."""
        found = keyword_value(call, "lr_lambda", 1)
        functions = found.elts if isinstance(found, (ast.List, ast.Tuple)) else [found]
        for function in functions:
            if isinstance(function, ast.Name) and function.id in self.index.functions:
                function = self.index.functions[function.id].node
            elif isinstance(function, ast.Name):
                function = self._bound_lambda(function.id) or function
            if not isinstance(function, (ast.Lambda, ast.FunctionDef)):
                return UNREAD
            params = [a.arg for a in function.args.args]
            step = params[0] if params else None
            body = [function.body] if isinstance(function, ast.Lambda) else function.body
            for node in (inner for part in body for inner in ast.walk(part)):
                if isinstance(node, ast.Subscript) and _reads(node.slice, step):
                    return OVERRUNS
                if (
                    isinstance(node, ast.BinOp)
                    and isinstance(node.op, ast.Pow)
                    and _reads(node.left, step)
                ):
                    return OVERRUNS
        return None

    def _bound_lambda(self, name: str) -> ast.Lambda | None:
        """The lambda a name is bound to, once, in any scope of the module (a notebook's or
        a script's module level, a `main()`)."""
        found = [
            b.value for scope in self.index.scopes for b in scope.assigns(name)
        ]  # fmt: skip
        return found[0] if len(found) == 1 and isinstance(found[0], ast.Lambda) else None


OVERRUNS, UNREAD = "overruns", "unread"


def _own_statements(node: ast.AST):
    """The statements inside a loop, not inside nested loops or functions (their `break`
    is theirs)."""
    stack = list(node.body)
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                                ast.AsyncFunctionDef, ast.ClassDef)):  # fmt: skip
            continue
        stack.extend(
            child for child in ast.iter_child_nodes(current) if isinstance(child, ast.stmt)
        )
