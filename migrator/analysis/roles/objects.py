"""Which objects are prepared: the roles analysis's rules for objects that are not plain local
names made next to the loop (issue 10 items 4-6, issue 16 items 1 and 3).

- the function where the training objects meet (it makes the optimizer, receives the rest);
- several optimizers, each a known optimizer built on models' parameters (GANs);
- a Trainer's objects: `self.model = model` received, `self.gen` kept from a parameter, the
  GPU index it keeps (`self.gpu_id = gpu_id`) as the accelerator's device;
- objects held on other objects (`self.cfg.optimiser`, `self.optimizers["g"]`) and plateau
  schedulers (`.step(metric)`), left unprepared with a note.

A mixin of roles._Analyser, kept in its own module for size.
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import Origin, bindings_of, is_method, value_call  # fmt: skip
from migrator.analysis.roles.facts import SchedulerRole, TrainingFacts
from migrator.analysis.syntax.index import ModuleIndex, Scope

EPOCH_ARGUMENT = re.compile(r"epoch|step|iter", re.IGNORECASE)
GPU_INDEX = re.compile(r"^(gpu|gpu_id|gpu_index|local_rank|device_id)$")


class ObjectRoles:
    facts: TrainingFacts
    index: ModuleIndex
    imports: object

    # from roles._Analyser / loops.LoopAnalysis: _calls_reachable, _step_kind

    def _meeting_point(self) -> Scope | None:
        """The function that creates the optimizer the training loop steps, when it is not
        where the loaders come from."""
        facts = self.facts
        for loop in facts.training_loops:
            for call in self._calls_reachable(loop.calls):
                if call.method != "step":
                    continue
                # `optimizer.step()`, or `scaler.step(optimizer)` (a GradScaler's dance)
                for stepped in [call.receiver, *call.node.args[:1]]:
                    origin = facts.chain_origin(call.scope, stepped)
                    if origin is None or origin.scope.kind != "function":
                        continue
                    if any(
                        (built := value_call(b)) is not None
                        and patterns.is_optimizer_call(built, self.imports)
                        for b in bindings_of(origin)
                    ):
                        return origin.scope
        return None

    def _plateau_schedulers(self, owner: Scope) -> None:
        """`scheduler.step(val_loss)` / `ReduceLROnPlateau(...)`, wherever the scheduler is
        held (`self.cfg.scheduler`): left unprepared, with a note."""
        facts = self.facts
        roles = {role.name: role for role in facts.schedulers}
        for site in self.index.calls():
            if site.method != "step" or not patterns.call_args(site.node):
                continue
            origin = facts.chain_origin(site.scope, site.receiver)
            if (
                origin is None
                or origin.name in facts.optimizers
                or not self._at_home(origin, owner)
            ):
                continue
            if not self._plateau(origin) and (
                self._step_kind(origin, stepped=True) != "scheduler"
                or any(value_call(b) is not None for b in self._bindings(origin))
                or EPOCH_ARGUMENT.search(self.index.source.text_of(site.node.args[0]) if (
                    site.node.args) else "")  # `scheduler.step(epoch)`: an epoch, not a metric
            ):  # fmt: skip
                continue
            role = roles.get(origin.name)
            if role is None:
                role = SchedulerRole(origin.name, False, None)
                roles[origin.name] = role
                facts.schedulers.append(role)
            role.plateau, role.site = True, role.site or site.node
        for role in facts.schedulers:
            if self._plateau(Origin(self._home_of(role.name, owner), role.name)):
                role.plateau = True

    def _plateau(self, origin: Origin) -> bool:
        return any(
            (call := value_call(b)) is not None
            and patterns.last_part(self.imports.qualify(call.func)) == "ReduceLROnPlateau"
            for b in self._bindings(origin)
        )

    def _bindings(self, origin: Origin):
        """The bindings of a name, `self.x`, or an attribute chain (`self.cfg.optimiser`)."""
        return bindings_of(origin) or self.facts.chain_bindings(origin.scope, origin.name)

    def _kept_on_self(self, owner: Scope, name: str) -> str:
        """`self.gen` for `gen`, a parameter of a Trainer's `__init__` stored as `self.gen =
        gen` (or `gen.to(device)`, or `self.gen, self.dis = gen, dis`): the methods train
        `self.gen`, so that is the model prepare rebinds."""
        if not is_method(owner) or name not in owner.params:
            return name
        kept = []
        for other, bindings in owner.bindings.items():
            bindings = [b for b in bindings if not self._from_prepare(b)]  # migrated before
            if not other.startswith(patterns.SELF + ".") or len(bindings) != 1:
                continue
            value = bindings[0].element if bindings[0].unpacked else bindings[0].value
            while (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr in ("to", "cuda")
            ):
                value = value.func.value  # `self.gen = gen.to(device)`, which MIG003 unwraps
            if isinstance(value, ast.Name) and value.id == name:
                kept.append(other)
        return kept[0] if len(kept) == 1 else name

    def _known_optimizer(self, call: ast.Call) -> bool:
        """`torch.optim.Adam(...)` / a known optimizer class (not any class fed parameters)."""
        qualified = self.imports.qualify(call.func) or ""
        name = patterns.last_part(qualified)
        known = name in patterns.OPTIMIZER_CLASSES or (
            qualified.startswith("torch.optim.") and ".lr_scheduler." not in qualified
        )
        return known and patterns.is_optimizer_call(call, self.imports)

    def _from_prepare(self, binding) -> bool:
        """`a, b = accelerator.prepare(a, b)`: a binding of code already migrated."""
        value = binding.value
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "prepare"
            and patterns.name_of(value.func.value) in self.facts.accelerator_names
        )

    def _placed_or_received(self, owner: Scope, name: str) -> bool:
        """A Trainer's `self.model = model.to(gpu_id)` / `self.model = model` (a parameter of
        its `__init__`, or an entry of one: `self.gen = models["gen"]`) / `self.model =
        DDP(...)`: the object the loop calls is its model."""
        if any(w.site.scope is owner and w.target == name for w in self.facts.distributed.wraps):
            return True
        for binding in owner.assigns(name):
            value = binding.element if binding.unpacked else binding.value
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and (value.func.attr in ("to", "cuda"))
            ):
                return True
            if isinstance(value, ast.Subscript) and patterns.string_value(value.slice):
                value = value.value  # `models["gen"]`
            if (
                name.startswith(patterns.SELF + ".")
                and isinstance(value, ast.Name)
                and value.id in owner.params
            ):
                return True
        return False

    def _device_index_attribute(self, scope: Scope, name: str, value: ast.expr) -> bool:
        """A Trainer's `self.gpu_id = gpu_id` (a parameter, not a launch rank MIG010 reads):
        the GPU index the single-GPU script places everything on is the accelerator's device."""
        return (
            GPU_INDEX.match(name.split(".", 1)[1]) is not None
            and isinstance(value, ast.Name)
            and value.id in scope.params
            and self.facts.rank_kind(scope, value.id) is None
        )
