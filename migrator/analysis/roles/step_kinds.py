"""What a name the training loop calls `.step()` (or only `.zero_grad()`) on is: an optimizer,
a scheduler (stepped per batch or per epoch), or a GradScaler whose `step(optimizer)` steps the
optimizer it is handed. Read from how each name is made, then from its name.

A mixin of roles._Analyser: it reads `self.facts`, `self.index` and `self.imports`.
"""

from __future__ import annotations

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import Origin, bindings_of, value_call
from migrator.analysis.roles.facts import SchedulerRole
from migrator.analysis.syntax.index import CallSite, Scope


class StepKinds:
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
            for site in self.index.calls():
                if site.method != "step" or site.receiver is None:
                    continue
                home = self._home_of(name, owner)
                if self.facts.chain_origin(site.scope, site.receiver) != Origin(home, name):
                    continue
                if self._in_training(site, per_batch):
                    per_step = True
            bindings = self._home_of(name, owner).assigns(name)
            roles.append(SchedulerRole(name, per_step, bindings[-1] if bindings else None))
        return roles
