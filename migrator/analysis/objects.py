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

from migrator.analysis import patterns
from migrator.analysis.facts import (
    Origin,
    SchedulerRole,
    TrainingFacts,
    bindings_of,
    is_method,
    value_call,
)  # fmt: skip
from migrator.analysis.index import ModuleIndex, Scope

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
                origin = facts.chain_origin(call.scope, call.receiver)
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
        gen`: the methods train `self.gen`, so that is the model prepare rebinds."""
        if not is_method(owner) or name not in owner.params:
            return name
        kept = []
        for other, bindings in owner.bindings.items():
            bindings = [b for b in bindings if not self._from_prepare(b)]  # migrated before
            if (
                other.startswith(patterns.SELF + ".")
                and len(bindings) == 1
                and isinstance(bindings[0].value, ast.Name)
                and bindings[0].value.id == name
            ):
                kept.append(other)
        return kept[0] if len(kept) == 1 else name

    def _each_trains_a_model(self, owner: Scope, optimizers: list[str]) -> bool:
        """Several optimizers (a GAN's, actor and critic): one prepare holds them all, with
        their models, when each is built here on the parameters of models found here, directly
        or through a name holding them (`params_g = chain(G.parameters(), Q.parameters())`)."""
        for name in optimizers:
            home = self._home_of(name, owner)
            calls = [value_call(b) for b in self._bindings(Origin(home, name))
                     if not self._from_prepare(b)]  # fmt: skip
            if not calls or any(call is None for call in calls):
                return False
            roots = []
            for call in calls:
                if not self._known_optimizer(call):
                    made = self._optimizer_helper_models(home, call)
                    if made is None:
                        return False  # an EMA's `.step()` or a factory's optimizer: not ours
                    roots += made
                    continue
                roots += [root for arg in patterns.call_args(call)
                          for root in patterns.parameter_roots(arg.value) or (
                              self._parameters_named(home, arg.value) or [])]  # fmt: skip
            models = self.facts.models
            if not roots or not all(self._kept_on_self(home, r) in models for r in roots):
                return False
        return True

    def _optimizer_helper_models(self, scope: Scope, call: ast.Call) -> list[str] | None:
        """The models handed to a helper of this file that returns a known optimizer built on
        the parameters of its own parameters (`make_optimizer(D_A, lr)` over `def
        make_optimizer(net, lr): return Adam(net.parameters(), lr)`); None for anything else."""
        helper = self._helper_function(scope, call.func)
        if helper is None:
            return None
        params = helper.params[1:] if isinstance(call.func, ast.Attribute) else helper.params
        returns = [n for n in _own_nodes(helper.node) if isinstance(n, ast.Return)]
        built = [_returned_call(helper, r.value) for r in returns]
        if not built or any(b is None or not self._known_optimizer(b) for b in built):
            return None
        models = []
        for optimizer in built:
            for arg in patterns.call_args(optimizer):
                for root in patterns.parameter_roots(arg.value):
                    handed = _argument_for(call, params, root)
                    if handed is None:
                        return None
                    models.append(handed)
        return models or None

    def _helper_function(self, scope: Scope, func: ast.expr) -> Scope | None:
        """The function of this file a call runs: `helper(...)` defined at module level (or in
        the calling scope), `self.helper(...)` a method of the calling method's class."""
        if isinstance(func, ast.Name):
            parents, name = (scope, self.index.module_scope), func.id
        elif (
            isinstance(func, ast.Attribute)
            and patterns.name_of(func.value) == patterns.SELF
            and is_method(scope)
        ):
            parents, name = (scope.parent,), func.attr
        else:
            return None
        found = [s for s in self.index.scopes
                 if s.kind == "function" and s.name == name and s.parent in parents]  # fmt: skip
        return found[0] if len(found) == 1 else None

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
        its `__init__`) / `self.model = DDP(...)`: the object the loop calls is its model."""
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


def _own_nodes(function: ast.AST):
    """The nodes of a function's body, not of the functions and classes it defines."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _returned_call(helper: Scope, value: ast.expr | None) -> ast.Call | None:
    """`return Adam(...)`, or `return optimizer` where `optimizer = Adam(...)` once."""
    name = patterns.name_of(value) if value is not None else None
    if name is not None:
        bindings = helper.assigns(name)
        value = bindings[0].value if len(bindings) == 1 and not bindings[0].unpacked else None
    return value if isinstance(value, ast.Call) else None


def _argument_for(call: ast.Call, params: list[str], root: str) -> str | None:
    """The name the call passes for the helper's parameter `root` (positional or keyword)."""
    if root not in params:
        return None
    position = params.index(root)
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if index == position:
            return patterns.name_of(arg)
    keyword = next((k.value for k in call.keywords if k.arg == root), None)
    return patterns.name_of(keyword) if keyword is not None else None
