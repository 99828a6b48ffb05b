"""Roles of names: which scope owns training, and its models, optimizers, loaders, schedulers,
devices, and where loader data flows.

Everything is derived from the syntactic index (index.py). Names used in helper functions are
traced back to the owner through the call sites that pass them (`origin`), so a
`train_epoch(model, loader, optimizer, device)` helper is understood in terms of `main()`'s names.
Rules read these facts; none re-derives them.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.reader import read_distributed
from migrator.analysis.model.forwards import forwarded
from migrator.analysis.model.origins import (  # fmt: skip
    Origin,
    class_methods,
    is_method,
    value_call,
)
from migrator.analysis.roles import explain
from migrator.analysis.roles.apex import apex_amp
from migrator.analysis.roles.bypassed_forwards import BypassedForwards
from migrator.analysis.roles.device_reads import chosen_device, read_from_tensor
from migrator.analysis.roles.eval_loaders import EvalLoaders
from migrator.analysis.roles.facts import TrainingFacts, chain_text
from migrator.analysis.roles.held_objects import HeldObjects
from migrator.analysis.roles.homes import ClassHomes
from migrator.analysis.roles.loops import LoopAnalysis
from migrator.analysis.roles.model_classes import model_methods
from migrator.analysis.roles.objects import ObjectRoles
from migrator.analysis.roles.optimizer_pairs import OptimizerPairs
from migrator.analysis.roles.regions import DataRegions
from migrator.analysis.roles.retained_graphs import RetainedGraphs
from migrator.analysis.roles.second_readings import SecondReadings
from migrator.analysis.roles.step_kinds import StepKinds
from migrator.analysis.roles.trained_models import TrainedModels
from migrator.analysis.syntax.index import CallSite, ModuleIndex, Scope
from migrator.findings import Finding
from migrator.source import Source

ROLLOUTS = (
    "the training loop learns from episodes it rolls out in an environment (`env.step(...)`), "
    "not from a DataLoader: on N processes each would roll out and learn on its own, which is "
    "not data-parallel training of the original (reinforcement learning needs its experience "
    "shared or gathered by design); migrate it by hand"
)
ENVIRONMENT_MODULES = ("gym", "gymnasium", "pettingzoo", "dm_control", "procgen", "minigrid")


class _Analyser(
    SecondReadings,
    ObjectRoles,
    OptimizerPairs,
    ClassHomes,
    HeldObjects,
    TrainedModels,
    DataRegions,
    EvalLoaders,
    LoopAnalysis,
    RetainedGraphs,
    BypassedForwards,
    StepKinds,
):
    def __init__(self, tree: ast.Module, source: Source, index: ModuleIndex | None) -> None:
        self.index = index if index is not None else ModuleIndex(tree, source)
        self.facts = TrainingFacts(index=self.index, distributed=read_distributed(self.index))
        self.imports = self.index.imports
        self._callees: dict[int, Scope | None] = {}  # id(call site) -> the function it calls
        self._sources: dict[int, object] = {}  # id(loop) -> its LoopSource (loop_sources.py)

    # -- entry point -------------------------------------------------------------------------
    def run(self) -> TrainingFacts:
        self._find_accelerator()
        backward_sites = self._backward_sites()
        if not backward_sites:
            return self.facts
        backward_functions = self._backward_functions(backward_sites)
        self._find_training_loops(backward_sites, backward_functions)
        if not self.facts.training_loops:
            steps = any(site.method == "step" for site in self.index.calls())
            if steps and self.facts.distributed.blocking:  # RPC, FSDP, Hogwild: loop or no loop
                self.facts.findings = list(self.facts.distributed.findings)
                self.facts.blocked = True
            return self.facts
        self.facts.findings += self.facts.distributed.findings
        if self.facts.distributed.blocking:
            self.facts.blocked = True
            return self.facts
        per_batch = self._per_batch_functions()
        self._find_owner_and_roles(per_batch)
        if not self.facts.blocked and self.facts.owner is not None:
            for node, message in apex_amp(self.index):
                self._finding(node, "MIG900", message)
        if not self.facts.blocked and self.facts.owner is not None:
            self._frozen_holders()
        if self.facts.blocked or self.facts.owner is None:
            return self.facts
        self._find_eval_loops()
        self._find_regions(per_batch)
        self.facts.model_methods = model_methods(self.facts)
        self._find_devices()
        self.facts.backward_calls = [
            site
            for site in backward_sites
            if not self._is_accelerator_receiver(site) and self._in_training(site, per_batch)
        ]
        self._find_reused_forwards()
        if not self.facts.blocked:
            self._find_bypassed_forwards()
        return self.facts

    # -- accelerator and backward ------------------------------------------------------------
    def _find_accelerator(self) -> None:
        for scope in self.index.scopes:
            for name, bindings in scope.bindings.items():
                for binding in bindings:
                    call = value_call(binding)
                    if call is not None and patterns.is_accelerator_call(call, self.imports):
                        self.facts.accelerator_names.add(name)
                        self.facts.accelerator_bindings.append(binding)
        for site in self.index.calls():
            if site.method == "prepare" and self._is_accelerator_receiver(site):
                for arg in patterns.call_args(site.node):
                    name = patterns.name_of(arg.value) or chain_text(arg.value)  # `self.cfg.opt`
                    if name is not None:
                        self.facts.prepared_already.add(name)
                small = site.small  # `train_loader = accelerator.prepare(DataLoader(...))`
                if isinstance(small, ast.Assign) and small.value is site.node:
                    for target in small.targets:
                        name = patterns.name_of(target)
                        if name is not None:
                            self.facts.prepared_already.add(name)

    def _is_accelerator_receiver(self, site: CallSite) -> bool:
        return patterns.name_of(site.receiver) in self.facts.accelerator_names

    def _find_owner_and_roles(self, per_batch: set[int]) -> None:
        """Roles as seen from the owner; when that fails because the function that creates the
        optimizer receives the loaders (or the model) from its callers, the objects meet in
        that function: roles again with its parameters as its own objects."""
        facts = self.facts
        findings = list(facts.findings)
        self._roles(per_batch)
        if facts.blocked:
            self._meet(per_batch, findings)
        if facts.blocked:
            self._through_constructors(per_batch, findings)

    def _roles(self, per_batch: set[int]) -> None:
        facts = self.facts
        loaders: list[Origin] = []
        step_receivers: list[tuple[CallSite, Origin]] = []
        zero_grad: list[Origin] = []
        forwards: list[Origin] = []
        unnamed_steps: list[CallSite] = []
        inline_scopes: list[Scope] = []
        for loop in facts.training_loops:
            source = self._loop_source(loop)
            if source is not None and source.inline is not None:
                statement = self._inline_statement(loop, source)
                if statement is None:
                    self._finding(loop.node, "MIG900", f"the DataLoader built at line "
                                  f"{source.inline.lineno} for {explain.loop_words(loop)} "
                                  "cannot be named where it is built; migrate by hand")  # fmt: skip
                    return
                facts.inline_loaders.append((source.inline, statement))
                inline_scopes.append(statement.block.scope)
            if source is not None and source.held:  # in a container: prepared where it is made
                facts.held_loaders += [h for h in source.held if h not in facts.held_loaders]
                facts.train_held += [value for value, _statement in source.held]
                inline_scopes.append(source.scope)
            for name in source.loaders if source is not None else []:
                found = facts.origin(source.scope, name) or self._shared_loader(source.scope, name)
                if found is None:
                    self._block(loop.node, name, source.scope, loop)
                    return
                if found not in loaders:
                    loaders.append(found)
            for call in self._calls_reachable(loop.calls):
                receiver = chain_text(call.receiver)
                if call.method in ("step", "zero_grad") and self._callee_scope(call) is not None:
                    pass  # `self.step(x, y)`: the program's own method, followed, no optimizer
                elif call.method in ("step", "zero_grad") and receiver is not None:
                    origin = facts.chain_origin(call.scope, call.receiver)
                    if origin is None:
                        self._block(call.node, receiver, call.scope, loop)
                        return
                    if call.method == "step":
                        step_receivers.append((call, origin))
                        scaled = self._scaler_step_target(call)
                        if scaled is not None:
                            step_receivers.append((call, scaled))
                    else:
                        zero_grad.append(origin)
                elif call.method == "step" and receiver is None:
                    unnamed_steps.append(call)
                # `model(x)`, `model.forward(x)`, `model.train().forward(x)`
                called = patterns.name_of(forwarded(call.node.func))
                called = called or self._held_call(call)  # `self.cfg.model(x)`
                if called is not None and self._callee_scope(call) is None:
                    origin = facts.origin(call.scope, called)
                    if origin is not None:
                        forwards.append(origin)
        owners = {id(o.scope): o.scope for o in loaders}
        owners.update((id(scope), scope) for scope in inline_scopes)
        if facts.loaderless:  # no loader: the scope that makes the optimizer owns training
            step_receivers = [(c, o) for c, o in step_receivers if self._named_stepper(o)]
            owners = {id(o.scope): o.scope for _, o in step_receivers
                      if self._step_kind(o, stepped=True) == "optimizer"}  # fmt: skip
        if len(owners) != 1:
            self._finding(facts.training_loops[0].node, "MIG900", explain.several_owners(
                facts, loaders, self.imports))  # fmt: skip
            return
        owner = next(iter(owners.values()))
        facts.owner = owner
        facts.train_loaders = [o.name for o in loaders]
        if self._field_batches(loaders):
            return

        optimizers: list[str] = []
        schedulers: list[str] = []
        for _call, origin in step_receivers:
            kind = self._step_kind(origin, stepped=True)
            if kind is None or not self._at_home(origin, owner):
                continue
            target = optimizers if kind == "optimizer" else schedulers
            if origin.name not in target:
                target.append(origin.name)
        for origin in zero_grad:
            if (
                origin.name not in optimizers
                and (self._step_kind(origin, stepped=False) == "optimizer")
                and self._at_home(origin, owner)
            ):
                optimizers.append(origin.name)
        if not optimizers:
            kind = lambda origin: self._step_kind(origin, stepped=True)
            self._finding(facts.training_loops[0].node, "MIG900", explain.no_optimizer(
                facts, owner, step_receivers, unnamed_steps, kind))  # fmt: skip
            return
        facts.optimizers = optimizers
        by_home: dict[int, tuple[Scope, list[str]]] = {}
        for name in optimizers:
            home = self._home_of(name, owner)
            by_home.setdefault(id(home), (home, []))[1].append(name)
        models_by_home = []
        for home, names in by_home.values():
            models_by_home.append((home, self._models(home, names, forwards)))
            if facts.blocked:
                return
        if not self._model_homes(owner, models_by_home):
            lines = ", ".join(f"`{n}` {explain.where(self._home_of(n, owner))}" for n in optimizers)
            self._finding(facts.training_loops[0].node, "MIG900",
                          f"looked for one method making the optimizers of each model; found "
                          f"{lines}; migrate by hand")  # fmt: skip
            return
        facts.models = list(dict.fromkeys(m for _home, models in models_by_home for m in models))
        if self._trains_itself(owner):
            return
        if len(optimizers) > 1 and not self._each_trains_a_model(owner, optimizers):
            message = self.unpaired_optimizers(owner, optimizers)
            self._finding(facts.training_loops[0].node, "MIG906", message)
            return
        if not facts.models and facts.loaderless:
            self._finding(facts.training_loops[0].node, "MIG905", self._loaderless_no_model())
            return
        if facts.loaderless and self._rolls_out_episodes():
            self._finding(facts.training_loops[0].node, "MIG905", ROLLOUTS)
            return
        if not facts.models and self._rolls_out_episodes():  # `env.step(action)` is no optimizer
            self._finding(facts.training_loops[0].node, "MIG905", ROLLOUTS)
            return
        if not facts.models:
            made = self._home_of(optimizers[0], owner).assigns(optimizers[0])
            built = (f"is built at line {made[-1].statement.node.lineno} from no "
                     "`model.parameters()` of a model made there") if made else (
                     f"is not built {explain.where(self._home_of(optimizers[0], owner))}")  # fmt: skip
            self._finding(facts.training_loops[0].node, "MIG900",
                          f"could not tell which model the optimizer trains: `{optimizers[0]}` "
                          f"{built}, and {explain.loop_words(facts.training_loops[0])} calls no "
                          "model placed on a device; migrate by hand")  # fmt: skip
            return
        self._constructed_schedulers(owner, schedulers)
        facts.schedulers = self._schedulers(owner, schedulers, per_batch)
        self._plateau_schedulers(owner)

    def _rolls_out_episodes(self) -> bool:
        """Does the loader-less training loop step an environment (`env.step(action)`,
        `env.reset()` on an object a gym-like module makes, or a name that says so)?"""
        imported = any(
            full.split(".")[0] in ENVIRONMENT_MODULES for full in self.imports.aliases.values()
        )
        for loop in self.facts.training_loops:
            around = [c for scope in self._callers_of(loop.scope) for c in scope.calls]
            for call in self._calls_reachable([*loop.calls, *around]):
                receiver = (patterns.name_of(call.receiver) or "").rsplit(".", 1)[-1].lower()
                if call.method not in ("step", "reset") or not ("env" in receiver or imported):
                    continue
                origin = self.facts.origin(call.scope, patterns.name_of(call.receiver) or "")
                built = [value_call(b) for b in origin.scope.assigns(origin.name)] if origin else []
                if not any(
                    c is not None and (patterns.is_optimizer_call(c, self.imports)
                                       or patterns.is_scheduler_call(c, self.imports))
                    for c in built
                ):  # fmt: skip
                    return True
        return False

    def _callers_of(self, scope) -> list:
        """The functions that call `scope`'s function, transitively (a DQN agent's `train()`
        rolls out episodes and calls `learn()`, whose loop draws from the replay memory)."""
        found, queue = [], [scope]
        while queue:
            callee = queue.pop()
            for call in self.index.calls():
                caller = call.scope
                if self._callee_scope(call) is callee and all(caller is not f for f in found):
                    found.append(caller)
                    queue.append(caller)
        return found

    # -- devices -----------------------------------------------------------------------------
    def _find_devices(self) -> None:
        facts = self.facts
        scopes = list(facts.training_scopes)
        module = self.index.module_scope
        if module not in scopes:
            scopes.append(module)
        # A Trainer's `self.device`, bound in `__init__` and used by the training methods.
        kept = [m for m in class_methods(facts.owner) if m not in scopes] if is_method(
            facts.owner) else []  # fmt: skip
        for scope in scopes + kept:
            for name, bindings in scope.bindings.items():
                if scope in kept and not (
                    name.startswith(patterns.SELF + ".") and self._used_in_training(name)
                ):
                    continue
                for binding in bindings:
                    if binding.kind != "assign" or binding.value is None:
                        continue
                    value = binding.element if binding.unpacked else binding.value
                    if value is None:
                        continue
                    trainer_device = name.startswith(patterns.SELF + ".") and (
                        patterns.looks_like_device_name(name.split(".", 1)[1])
                        or self._device_index_attribute(scope, name, value)
                    )
                    if (
                        trainer_device
                        or patterns.is_device_constructor(value, self.imports)
                        or (patterns.is_accelerator_device(value, facts.accelerator_names))
                        or chosen_device(name, value, binding, self._tensor_reader(scope))
                    ):
                        if (
                            scope is module
                            and scope is not facts.owner
                            and not (self._used_in_training(name))
                        ):
                            continue
                        facts.device_bindings.append(binding)

    def _tensor_reader(self, scope: Scope):
        """`is_tensor_device(value)` for `scope`: `mu.device` of a tensor it computes with."""
        is_model = lambda name: self.facts.role(scope, name) == "model"
        return lambda value: read_from_tensor(scope, value, self.imports, is_model)

    def _used_in_training(self, name: str) -> bool:
        facts = self.facts
        return any(name in scope.uses for scope in [*facts.training_scopes, *facts.model_methods])

    # -- findings ----------------------------------------------------------------------------
    def _block(self, node: ast.AST, name: str | None, scope: Scope | None = None,
               loop=None) -> None:  # fmt: skip
        """MIG900: `name`, used at `node` in `scope`, has no single place where it is made."""
        detail = ""
        if scope is not None and name is not None:
            detail = f": {explain.untraceable(self.facts, scope, name)}"
        used = f" (used at line {node.lineno}" + (
            f", in {explain.loop_words(loop)})" if loop is not None else ")"
        )
        self._finding(
            node,
            "MIG900",
            f"`{name}`{used} reaches the training loop from outside this file (or from several "
            f"places){detail}; prepare it where it is created, by hand",
        )

    def _finding(self, node: ast.AST, code: str, message: str, level: str = "warning"):
        self.facts.findings.append(Finding(code=code, message=message, node=node, level=level))
        if level == "warning":
            self.facts.blocked = True


def analyse(
    tree: ast.Module, source: Source, index: ModuleIndex | None = None, plain_evaluation=False
) -> TrainingFacts:
    """The roles; `plain_evaluation`: evaluation loaders are not prepared (a note each)."""
    analyser = _Analyser(tree, source, index)
    analyser.facts.plain_evaluation = plain_evaluation
    return analyser.run()
