"""Roles of names: which scope owns training, and its models, optimizers, loaders, schedulers,
devices, and where loader data flows.

Everything is derived from the syntactic index (index.py). Names used in helper functions are
traced back to the owner through the call sites that pass them (`origin`), so a
`train_epoch(model, loader, optimizer, device)` helper is understood in terms of `main()`'s names.
Rules read these facts; none re-derives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

import libcst as cst

from migrator.analysis import patterns
from migrator.analysis.distributed import (
    RANK_KINDS, DistributedFacts, read_distributed,
)  # fmt: skip
from migrator.analysis.index import Binding, CallSite, Loop, ModuleIndex, Scope
from migrator.findings import Finding


@dataclass(frozen=True)
class Origin:
    scope: Scope
    name: str


@dataclass(eq=False)
class DataRegion:
    """Code that holds loader batches: a loop over a prepared loader, or a helper receiving one."""

    scope: Scope
    loop: Optional[Loop]  # None: the whole body of `scope` (a helper called with batch data)
    loader: Origin
    seeds: set[str]
    names: set[str] = field(default_factory=set)  # seeds plus names derived by pure access

    def contains(self, call: CallSite) -> bool:
        if call.scope is not self.scope:
            return False
        return self.loop is None or self.loop.contains(call.loop)


@dataclass(eq=False)
class SchedulerRole:
    name: str
    per_step: bool
    binding: Optional[Binding]


@dataclass(eq=False)
class TrainingFacts:
    index: ModuleIndex
    accelerator_names: set[str] = field(default_factory=set)
    accelerator_bindings: list[Binding] = field(default_factory=list)
    prepared_already: set[str] = field(default_factory=set)
    owner: Optional[Scope] = None
    training_loops: list[Loop] = field(default_factory=list)
    eval_loops: list[Loop] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    optimizers: list[str] = field(default_factory=list)
    train_loaders: list[str] = field(default_factory=list)
    eval_loaders: list[str] = field(default_factory=list)
    schedulers: list[SchedulerRole] = field(default_factory=list)
    regions: list[DataRegion] = field(default_factory=list)
    device_bindings: list[Binding] = field(default_factory=list)
    backward_calls: list[CallSite] = field(default_factory=list)
    training_scopes: list[Scope] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    blocked: bool = False  # a finding says the file cannot be migrated safely
    origins: dict[tuple[int, str], Optional[Origin]] = field(default_factory=dict)
    distributed: DistributedFacts = field(default_factory=DistributedFacts)  # MIG010

    @property
    def has_training(self) -> bool:
        return bool(self.training_loops) and self.owner is not None and not self.blocked

    @property
    def accelerator_name(self) -> str:
        existing = sorted(self.accelerator_names)
        if existing:
            return existing[0]
        return "self.accelerator" if is_method(self.owner) else "accelerator"

    def origin(self, scope: Scope, name: str) -> Optional[Origin]:
        return _origin(self, scope, name, frozenset())

    def role(self, scope: Scope, name: str) -> Optional[str]:
        """model / optimizer / loader / scheduler for a name as seen from `scope`."""
        found = self.origin(scope, name)
        if found is None or found.scope is not self.owner:
            return None
        if found.name in self.models:
            return "model"
        if found.name in self.optimizers:
            return "optimizer"
        if found.name in self.train_loaders or found.name in self.eval_loaders:
            return "loader"
        if any(s.name == found.name for s in self.schedulers):
            return "scheduler"
        return None

    def device_names(self, scope: Scope) -> set[str]:
        names: set[str] = set()
        current: Optional[Scope] = scope
        while current is not None:
            for binding in self.device_bindings:
                if binding.statement.block.scope is current:
                    names.add(binding.name)
            for name in current.params:
                if patterns.looks_like_device_name(name):
                    names.add(name)
            names.update(n for n in current.bindings if self.rank_kind(current, n) in RANK_KINDS)
            current = current.parent
        return names

    def rank_kind(self, scope: Scope, name: str) -> Optional[str]:
        """process_index / local_process_index / num_processes for a name holding one (MIG010)."""
        found = self.origin(scope, name)
        return self.distributed.kind_of(found.scope, found.name) if found is not None else None


def is_method(scope: Optional[Scope]) -> bool:
    return (
        scope is not None
        and scope.kind == "function"
        and scope.parent is not None
        and scope.parent.kind == "class"
    )


def instance_origin(scope: Scope, name: str) -> Optional[Origin]:
    """Where a Trainer's `self.x` is made: `__init__`, else the one method that binds it."""
    while scope is not None and not is_method(scope):
        scope = scope.parent
    if scope is None:
        return None
    methods = [m for m in scope.parent.children if m.kind == "function" and m.assigns(name)]
    methods.sort(key=lambda m: m.name != "__init__")
    if len(methods) == 1 or (methods and methods[0].name == "__init__"):
        return Origin(methods[0], name)
    return None


def class_methods(scope: Scope) -> list[Scope]:
    """The methods of the class `scope` is a method of (itself included)."""
    if not is_method(scope):
        return [scope]
    return [m for m in scope.parent.children if m.kind == "function"]


def _origin(facts: TrainingFacts, scope: Scope, name: str, seen: frozenset) -> Optional[Origin]:
    key = (id(scope), name)
    if key in facts.origins:
        return facts.origins[key]
    if key in seen:
        return None
    seen = seen | {key}
    result: Optional[Origin]
    if name.startswith(patterns.SELF + "."):
        result = instance_origin(scope, name)
    elif facts.distributed.launch_param(scope, name):  # the rank `mp.spawn` passes
        result = Origin(scope, name)
    elif scope.kind == "function" and name in scope.params:
        results = set()
        for site in _call_sites_of(facts.index, scope):
            argument = _argument_for(site.node, scope, name)
            if patterns.name_of(argument) is not None:
                results.add(_origin(facts, site.scope, patterns.name_of(argument), seen))
            else:
                results.add(None)
        result = results.pop() if len(results) == 1 else None
    elif scope.kind == "module" or scope.is_local(name):
        wrapped = facts.distributed.unwrapped(scope, name)  # `ddp_model = DDP(model)` is `model`
        result = _origin(facts, scope, wrapped, seen) if wrapped else Origin(scope, name)
    else:
        enclosing = scope.parent
        while enclosing is not None and enclosing.kind == "class":
            enclosing = enclosing.parent
        result = (
            _origin(facts, enclosing, name, seen) if enclosing is not None else Origin(scope, name)
        )
    facts.origins[key] = result
    return result


def _call_sites_of(index: ModuleIndex, function: Scope) -> list[CallSite]:
    if is_method(function):  # `self.train_epoch(...)` from a sibling method
        wanted = f"{patterns.SELF}.{function.name}"
        return [
            site for site in index.calls()
            if patterns.name_of(site.node.func) == wanted and site.scope.parent is function.parent
        ]  # fmt: skip
    return [
        site
        for site in index.calls()
        if isinstance(site.node.func, cst.Name) and site.node.func.value == function.name
    ]


def _argument_for(call: cst.Call, function: Scope, param: str) -> Optional[cst.BaseExpression]:
    positional = [p for p in function.params if not p.startswith("*")]
    if is_method(function):
        positional = positional[1:]  # `self` is not passed
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    position = positional.index(param) if param in positional else -1
    plain = [a for a in call.args if a.keyword is None and not a.star]
    if 0 <= position < len(plain):
        return plain[position].value
    return None


def _bindings(origin: Optional[Origin]) -> list[Binding]:
    if origin is None:
        return []
    return origin.scope.assigns(origin.name)


def _value_call(binding: Binding) -> Optional[cst.Call]:
    value = binding.element if binding.element is not None else binding.value
    if binding.unpacked and binding.element is None:
        return None
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
        value.func.attr.value in ("to", "cuda")
    ):
        value = value.func.value  # `Net().to(device)` is built by `Net()`
    return value if isinstance(value, cst.Call) else None


class _Analyser:
    def __init__(self, module: cst.Module) -> None:
        self.index = ModuleIndex(module)
        self.facts = TrainingFacts(index=self.index, distributed=read_distributed(self.index))
        self.imports = self.index.imports

    # -- entry point -------------------------------------------------------------------------
    def run(self) -> TrainingFacts:
        self._find_accelerator()
        backward_sites = self._backward_sites()
        if not backward_sites:
            return self.facts
        backward_functions = self._backward_functions(backward_sites)
        self._find_training_loops(backward_sites, backward_functions)
        if not self.facts.training_loops:
            return self.facts
        self.facts.findings += self.facts.distributed.findings
        if self.facts.distributed.blocking:
            self.facts.blocked = True
            return self.facts
        per_batch = self._per_batch_functions()
        self._find_owner_and_roles(per_batch)
        if self.facts.blocked or self.facts.owner is None:
            return self.facts
        self._find_eval_loops()
        self._find_regions(per_batch)
        self._find_devices()
        self.facts.backward_calls = [
            site
            for site in backward_sites
            if not self._is_accelerator_receiver(site) and self._in_training(site, per_batch)
        ]
        return self.facts

    # -- accelerator and backward ------------------------------------------------------------
    def _find_accelerator(self) -> None:
        for scope in self.index.scopes:
            for name, bindings in scope.bindings.items():
                for binding in bindings:
                    call = _value_call(binding)
                    if call is not None and patterns.is_accelerator_call(call, self.imports):
                        self.facts.accelerator_names.add(name)
                        self.facts.accelerator_bindings.append(binding)
        for site in self.index.calls():
            if site.method == "prepare" and self._is_accelerator_receiver(site):
                for arg in site.node.args:
                    if patterns.name_of(arg.value) is not None:
                        self.facts.prepared_already.add(patterns.name_of(arg.value))

    def _is_accelerator_receiver(self, site: CallSite) -> bool:
        return patterns.name_of(site.receiver) in self.facts.accelerator_names

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

    def _callee_scope(self, site: CallSite) -> Optional[Scope]:
        func = site.node.func
        if isinstance(func, cst.Name):
            return self.index.functions.get(func.value)
        name = patterns.name_of(func)
        if name is not None and is_method(site.scope):  # `self.train_epoch()`
            method = name.split(".", 1)[1]
            for sibling in class_methods(site.scope):
                if sibling.name == method:
                    return sibling
        return None

    # -- training loops ----------------------------------------------------------------------
    def _batch_loop_for(self, loop: Optional[Loop]) -> Optional[Loop]:
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
            if site.scope.kind == "function" and _call_sites_of(self.index, site.scope):
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
    def _find_owner_and_roles(self, per_batch: set[int]) -> None:
        facts = self.facts
        loaders: list[Origin] = []
        step_receivers: list[tuple[CallSite, Origin]] = []
        zero_grad: list[Origin] = []
        forwards: list[Origin] = []
        for loop in facts.training_loops:
            name, _ = patterns.loader_base(loop.iter, self.imports)
            found = facts.origin(loop.scope, name)
            if found is None:
                self._block(loop.node, name)
                return
            if found not in loaders:
                loaders.append(found)
            for call in self._calls_reachable(loop.calls):
                receiver = patterns.name_of(call.receiver)
                if call.method in ("step", "zero_grad") and receiver is not None:
                    origin = facts.origin(call.scope, receiver)
                    if origin is None:
                        self._block(call.node, receiver)
                        return
                    if call.method == "step":
                        step_receivers.append((call, origin))
                        scaled = self._scaler_step_target(call)
                        if scaled is not None:
                            step_receivers.append((call, scaled))
                    else:
                        zero_grad.append(origin)
                called = patterns.name_of(call.node.func)
                if called is not None and self._callee_scope(call) is None:
                    origin = facts.origin(call.scope, called)
                    if origin is not None:
                        forwards.append(origin)
        owners = {id(o.scope): o.scope for o in loaders}
        if len(owners) != 1:
            self._finding(facts.training_loops[0].node, "MIG900",
                          "training objects come from several scopes; migrate by hand")  # fmt: skip
            return
        owner = next(iter(owners.values()))
        facts.owner = owner
        facts.train_loaders = [o.name for o in loaders]

        optimizers: list[str] = []
        schedulers: list[str] = []
        for _call, origin in step_receivers:
            kind = self._step_kind(origin, stepped=True)
            if origin.scope is not owner or kind is None:
                continue
            target = optimizers if kind == "optimizer" else schedulers
            if origin.name not in target:
                target.append(origin.name)
        for origin in zero_grad:
            if origin.scope is owner and origin.name not in optimizers and (
                self._step_kind(origin, stepped=False) == "optimizer"
            ):
                optimizers.append(origin.name)
        if not optimizers:
            self._finding(facts.training_loops[0].node, "MIG900",
                          "no optimizer step found in the training loop; migrate by hand")  # fmt: skip
            return
        if len(optimizers) > 1:
            self._finding(
                facts.training_loops[0].node,
                "MIG906",
                f"several optimizers ({', '.join(optimizers)}) train in one loop; models, "
                "optimizers and backward passes need a human to pair them",
            )
            return
        facts.optimizers = optimizers
        facts.models = self._models(owner, optimizers, forwards)
        if facts.blocked:
            return
        if not facts.models:
            self._finding(facts.training_loops[0].node, "MIG900",
                          "could not tell which model the optimizer trains; migrate by hand")  # fmt: skip
            return
        for name, bindings in owner.bindings.items():
            # Schedulers stepped outside the loop (per epoch) are found by their constructor.
            calls = [_value_call(b) for b in bindings if b.kind == "assign"]
            if name not in schedulers and any(
                call is not None and patterns.is_scheduler_call(call, self.imports)
                for call in calls
            ):
                schedulers.append(name)
        facts.schedulers = self._schedulers(owner, schedulers, per_batch)

    def _scaler_step_target(self, call: CallSite) -> Optional[Origin]:
        """`scaler.step(optimizer)`: the optimizer is the argument."""
        argument = patterns.name_of(call.node.args[0].value) if call.node.args else None
        receiver_name = patterns.name_of(call.receiver)
        if argument is None or receiver_name is None:
            return None
        receiver = self.facts.origin(call.scope, receiver_name)
        if not self._is_scaler(receiver):
            return None
        return self.facts.origin(call.scope, argument)

    def _is_scaler(self, origin: Optional[Origin]) -> bool:
        if origin is None:
            return False
        for binding in _bindings(origin):
            call = _value_call(binding)
            if call is not None and patterns.is_scaler_call(call, self.imports):
                return True
        return "scaler" in origin.name.lower()

    def _step_kind(self, origin: Origin, stepped: bool) -> Optional[str]:
        """optimizer / scheduler / None for a name the loop calls `.step()` (stepped) or only
        `.zero_grad()` on. Modules have `zero_grad()` too: that alone never makes an optimizer."""
        built_by_unknown = False
        for binding in _bindings(origin):
            call = _value_call(binding)
            if call is None:
                continue
            if patterns.is_scaler_call(call, self.imports):
                return None
            if patterns.is_scheduler_call(call, self.imports):
                return "scheduler"
            if patterns.is_optimizer_call(call, self.imports):
                return "optimizer"
            built_by_unknown = True
        lowered = origin.name.lower()
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

    def _models(self, owner: Scope, optimizers: list[str], forwards: list[Origin]) -> list[str]:
        models: list[str] = []
        saw_constructor = False
        for name in optimizers:
            for binding in owner.assigns(name):
                call = _value_call(binding)
                if call is None:
                    continue
                saw_constructor = True
                for arg in call.args:
                    for root in patterns.parameter_roots(arg.value):
                        found = self.facts.origin(owner, root)
                        if found is None or found.scope is not owner:
                            self._block(call, root)
                            return []
                        if found.name not in models:
                            models.append(found.name)
        if saw_constructor:
            return models
        # The optimizer was built elsewhere (a fragment): the model is what the loop calls and
        # the script places on a device or switches to train mode.
        for origin in forwards:
            if origin.scope is not owner or patterns.LOSS_NAME.search(origin.name):
                continue
            uses = owner.uses.get(origin.name, [])
            placed = any(u.kind == "attr" and u.attr in ("to", "cuda", "train", "parameters")
                         for u in uses)  # fmt: skip
            if (placed or origin.name in self.facts.prepared_already) and (
                origin.name not in models
            ):
                models.append(origin.name)
        return models

    def _schedulers(self, owner: Scope, stepped: list[str], per_batch: set[int]):
        roles = []
        for name in stepped:
            per_step = False
            for site in self.index.calls():
                receiver = patterns.name_of(site.receiver)
                if site.method != "step" or receiver is None:
                    continue
                if self.facts.origin(site.scope, receiver) != Origin(owner, name):
                    continue
                if self._in_training(site, per_batch):
                    per_step = True
            bindings = owner.assigns(name)
            roles.append(SchedulerRole(name, per_step, bindings[-1] if bindings else None))
        return roles

    # -- eval loops and data regions ---------------------------------------------------------
    def _is_loader(self, origin: Origin) -> bool:
        if origin.name in self.facts.train_loaders:
            return True
        for binding in _bindings(origin):
            call = _value_call(binding)
            if call is not None and patterns.is_loader_call(call, self.imports):
                return True
        return False

    def _find_eval_loops(self) -> None:
        facts = self.facts
        for scope in self.index.scopes:
            for loop in scope.loops:
                if loop in facts.training_loops or any(loop.contains(t) or t.contains(loop)
                                                       for t in facts.training_loops):  # fmt: skip
                    continue
                name, _ = patterns.loader_base(loop.iter, self.imports)
                if name is None:
                    continue
                found = facts.origin(scope, name)
                if found is None or found.scope is not facts.owner or not self._is_loader(found):
                    continue
                if scope is not facts.owner and not _call_sites_of(self.index, scope):
                    continue
                facts.eval_loops.append(loop)
                if found.name not in facts.train_loaders and found.name not in facts.eval_loaders:
                    facts.eval_loaders.append(found.name)

    def _find_regions(self, per_batch: set[int]) -> None:
        facts = self.facts
        for loop in [*facts.training_loops, *facts.eval_loops]:
            name, through_enumerate = patterns.loader_base(loop.iter, self.imports)
            target = loop.node.target if isinstance(loop.node, cst.For) else None
            seeds = set(loop.target_names)
            if through_enumerate and isinstance(target, cst.Tuple) and target.elements:
                first = target.elements[0].value
                if isinstance(first, cst.Name):
                    seeds.discard(first.value)
            region = DataRegion(
                scope=loop.scope, loop=loop, loader=facts.origin(loop.scope, name), seeds=seeds
            )
            facts.regions.append(region)
        # Helpers called with batch data inside a region receive it as a parameter.
        queue = list(facts.regions)
        seen_helpers: set[tuple[int, str]] = set()
        while queue:
            region = queue.pop()
            region.names = _derive(region)
            for site in region.scope.calls:
                callee = self._callee_scope(site)
                if callee is None or not region.contains(site):
                    continue
                for param in callee.params:
                    argument = _argument_for(site.node, callee, param)
                    if not isinstance(argument, cst.Name) or argument.value not in region.names:
                        continue
                    if (id(callee), param) in seen_helpers:
                        continue
                    seen_helpers.add((id(callee), param))
                    helper = DataRegion(scope=callee, loop=None, loader=region.loader,
                                        seeds={param})  # fmt: skip
                    facts.regions.append(helper)
                    queue.append(helper)
        for region in facts.regions:
            if region.scope not in facts.training_scopes:
                facts.training_scopes.append(region.scope)
        if facts.owner not in facts.training_scopes:
            facts.training_scopes.insert(0, facts.owner)
        for scope in self.index.scopes:
            if id(scope) in per_batch and scope not in facts.training_scopes:
                facts.training_scopes.append(scope)
        looping = {id(loop.scope) for loop in [*facts.training_loops, *facts.eval_loops]}
        for scope in self.index.scopes:  # a Trainer's fit(): it drives the loops
            if scope not in facts.training_scopes and any(
                id(self._callee_scope(c)) in looping for c in scope.calls
                if self._callee_scope(c) is not None
            ):
                facts.training_scopes.append(scope)

    # -- devices -----------------------------------------------------------------------------
    def _find_devices(self) -> None:
        facts = self.facts
        scopes = list(facts.training_scopes)
        module = self.index.module_scope
        if module not in scopes:
            scopes.append(module)
        for scope in scopes:
            for name, bindings in scope.bindings.items():
                for binding in bindings:
                    if binding.kind != "assign" or binding.value is None:
                        continue
                    value = binding.element if binding.unpacked else binding.value
                    if value is None:
                        continue
                    trainer_device = name.startswith(patterns.SELF + ".") and (
                        patterns.looks_like_device_name(name.split(".", 1)[1])
                    )
                    if trainer_device or patterns.is_device_constructor(value, self.imports) or (
                        patterns.is_accelerator_device(value, facts.accelerator_names)
                    ):
                        if scope is module and scope is not facts.owner and not (
                            self._used_in_training(name)
                        ):
                            continue
                        facts.device_bindings.append(binding)

    def _used_in_training(self, name: str) -> bool:
        return any(name in scope.uses for scope in self.facts.training_scopes)

    # -- findings ----------------------------------------------------------------------------
    def _block(self, node: cst.CSTNode, name: Optional[str]) -> None:
        self._finding(
            node,
            "MIG900",
            f"`{name}` reaches the training loop from outside this file (or from several "
            "places); prepare it where it is created, by hand",
        )

    def _finding(self, node: cst.CSTNode, code: str, message: str, level: str = "warning"):
        self.facts.findings.append(Finding(code=code, message=message, node=node, level=level))
        if level == "warning":
            self.facts.blocked = True


def _derive(region: DataRegion) -> set[str]:
    """Seeds plus names bound (only) by pure access to loader data inside the region."""
    names = set(region.seeds)
    scope = region.scope
    candidates: dict[str, list[Binding]] = {}
    for name, bindings in scope.bindings.items():
        inside = [b for b in bindings if b.kind in ("assign", "for") and _binding_in(b, region)]
        if inside:
            candidates[name] = inside
    changed = True
    while changed:
        changed = False
        for name, bindings in candidates.items():
            if name in names:
                continue
            # `x = x.to(device)` keeps x as data only if x was data already: a seed, or bound
            # from data by some other statement.
            grounded = name in region.seeds or any(_derived_value(b, names) for b in bindings)
            if grounded and all(_derived_value(b, names | {name}) for b in bindings):
                names.add(name)
                changed = True
    # A seed rebound from non-data (`x = model(x)`) stops being data for this analysis.
    for name in list(names):
        for binding in candidates.get(name, []):
            if binding.kind == "assign" and not _derived_value(binding, names | {name}):
                names.discard(name)
    return names


def _binding_in(binding: Binding, region: DataRegion) -> bool:
    if binding.statement.block.scope is not region.scope:
        return False
    if region.loop is None:
        return True
    return region.loop.contains(binding.loop) and binding.loop is not None


def _derived_value(binding: Binding, names: set[str]) -> bool:
    if binding.kind == "for":
        name, _ = patterns.loader_base(binding.value, _NO_IMPORTS)
        return data_root(binding.value, names) is not None or name in names
    value = binding.element if binding.element is not None else binding.value
    return value is not None and data_root(value, names) is not None


def data_root(expr: cst.BaseExpression, names: set[str]) -> Optional[str]:
    """The loader-data name `expr` reaches by pure access (subscript, attribute, device-keeping
    tensor methods, identity comprehensions), or None."""
    while True:
        if isinstance(expr, cst.Name):
            return expr.value if expr.value in names else None
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Attribute):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method in ("items", "values", "keys") or (
                method in patterns.DEVICE_PRESERVING_METHODS
            ):
                expr = expr.func.value
            else:
                return None
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in (
            "tuple",
            "list",
            "dict",
        ):
            if len(expr.args) != 1:
                return None
            expr = expr.args[0].value
        elif isinstance(expr, (cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            expr = expr.for_in.iter
        elif isinstance(expr, (cst.Tuple, cst.List)):
            roots = [data_root(e.value, names) for e in expr.elements]
            return roots[0] if roots and all(roots) else None
        else:
            return None


class _NoImports:
    def qualify(self, node):
        from migrator.analysis.imports import dotted_name

        return dotted_name(node)


_NO_IMPORTS = _NoImports()


def analyse(module: cst.Module) -> TrainingFacts:
    return _Analyser(module).run()
