"""The facts analysis hands to the rules: the training objects and where they are made.

`TrainingFacts` holds the roles; `origin(scope, name)` asks the program model where the object
a name holds is made (model/origins.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.facts import RANK_KINDS, DistributedFacts
from migrator.analysis.effects.processes import Processes
from migrator.analysis.model.chains import (
    chain_text,
    holder_alias,
    key_text,
    split_chain,
)
from migrator.analysis.model.origins import Origin, _origin, class_methods, is_method
from migrator.analysis.syntax.index import Binding, CallSite, Loop, ModuleIndex, Scope, Statement
from migrator.findings import Finding

# The name of a DataLoader built where a loop uses it (`enumerate(DataLoader(...))`) until
# MIG006 names it: a data region's loader (`DataRegion.loader.name`).
INLINE_LOADER = "<DataLoader built in place>"


@dataclass(eq=False)
class DataRegion:
    """Code that holds loader batches: a loop over a prepared loader, or a helper receiving one."""

    scope: Scope
    loop: Loop | None  # None: the whole body of `scope` (a helper called with batch data)
    loader: Origin
    seeds: set[str]
    names: set[str] = field(default_factory=set)  # seeds plus names derived by pure access
    # ids of the simple statements that bind the seeds from the loader (`batch = next(it)`):
    # they do not count as rebinding a seed from non-data.
    seed_statements: set[int] = field(default_factory=set)
    # the loaders whose batches reach it (a helper's: through every call of it), whether a
    # call hands it something else, whether they may hold what prepare does not place
    # (batch_feeds.py)
    feeds: list[Origin] = field(default_factory=list)
    mixed: bool = False
    opaque: bool = False

    def contains(self, call: CallSite) -> bool:
        if call.scope is not self.scope:
            return False
        return self.loop is None or self.loop.contains(call.loop)


@dataclass(eq=False)
class SchedulerRole:
    name: str
    per_step: bool
    binding: Binding | None
    plateau: bool = False  # `ReduceLROnPlateau`, or `.step(metric)`: never prepared
    site: ast.AST | None = None  # its `.step(metric)` call, where no binding is in sight
    plain: str | None = None  # why a per-step scheduler stays unprepared (step_kinds.py)


@dataclass(eq=False)
class TrainingFacts:
    index: ModuleIndex
    accelerator_names: set[str] = field(default_factory=set)
    accelerator_bindings: list[Binding] = field(default_factory=list)
    prepared_already: set[str] = field(default_factory=set)
    owner: Scope | None = None
    training_loops: list[Loop] = field(default_factory=list)
    # the training loops draw no batches from a DataLoader (nanoGPT's `get_batch`, full-batch
    # graph models): model and optimizer are prepared, the data is not sharded (loops.py)
    loaderless: bool = False
    # loaders built where a training loop iterates them or a wrapper is bound
    # (`enumerate(DataLoader(ds, ...))`, `it = cycle(DataLoader(...))`): (the call, the statement
    # before which MIG006 names and prepares it)
    inline_loaders: list[tuple[ast.Call, Statement]] = field(default_factory=list)
    # loaders a container holds with no name of their own (`{"train": DataLoader(...)}`, a
    # dict comprehension, a helper's returned dict), which a training or evaluation loop draws
    # from: (the value, the statement that writes it), MIG006 prepares each in place
    held_loaders: list[tuple[ast.expr, Statement]] = field(default_factory=list)
    # those of `held_loaders` a training loop draws from (the values)
    train_held: list[ast.expr] = field(default_factory=list)
    eval_loops: list[Loop] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    optimizers: list[str] = field(default_factory=list)
    train_loaders: list[str] = field(default_factory=list)
    eval_loaders: list[str] = field(default_factory=list)
    # a loop's loader parameter its calls fill with different loaders of this file: (id of
    # the function, parameter) -> the loaders of its calls (eval_loaders.py)
    loader_params: dict[tuple[int, str], list[Origin]] = field(default_factory=dict)
    _processes: Processes | None = field(default=None, repr=False)
    schedulers: list[SchedulerRole] = field(default_factory=list)
    regions: list[DataRegion] = field(default_factory=list)
    device_bindings: list[Binding] = field(default_factory=list)
    backward_calls: list[CallSite] = field(default_factory=list)
    # every backward call and every call of a function that runs one (through calls): where
    # the program's code drives a training step (a joined program's entry, program/unit.py)
    step_sites: list[CallSite] = field(default_factory=list)
    training_scopes: list[Scope] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    blocked: bool = False  # a finding says the file cannot be migrated safely
    origins: dict[tuple[int, str], Origin | None] = field(default_factory=dict)
    distributed: DistributedFacts = field(default_factory=DistributedFacts)  # MIG010
    # The function that creates some training objects and receives the others: its
    # parameters are traced no further than itself (prepared where the objects meet).
    meeting: Scope | None = None
    # Objects of a class prepared in another method than the owner's, where they are made
    # (a Trainer's `self.model`/`self.optimizer` in `__init__`, its loader in `fit_epoch()`):
    # name -> that method (homes.py).
    homes: dict[str, Scope] = field(default_factory=dict)
    # objects a class's methods receive are its callers' (origins.py): `self.x = x` in
    # `__init__` what the constructions pass, `fit(self, loader)` what `trainer.fit(loader)`
    # passes; read so when the class alone cannot own training (a Trainer its caller drives)
    through_instances: bool = False
    # evaluation loaders stay plain, each with a note (the engine's second try when prepared
    # ones left the migration unsound, or refused it): True, or the note's reason
    plain_evaluation: bool | str = False
    # A train/eval epoch function fed the training loader and plain eval loaders
    # (shared_epochs.py): a SharedEpoch each.
    shared_epochs: list = field(default_factory=list)
    # The methods of the classes trained models are made of (model_classes.py): the tensors
    # they place live inside the prepared model.
    model_methods: list[Scope] = field(default_factory=list)

    @property
    def has_training(self) -> bool:
        return bool(self.training_loops) and self.owner is not None and not self.blocked

    @property
    def accelerator_name(self) -> str:
        existing = sorted(self.accelerator_names)
        if existing:
            return existing[0]
        return "self.accelerator" if is_method(self.owner) else "accelerator"

    def origin(self, scope: Scope, name: str) -> Origin | None:
        """Where the object `name` names in `scope` is made. A chain (`self.cfg.optimiser`,
        `cfg.model`) is rooted where its holder is made, through a local alias of the holder
        (`cfg = self.training_config`): chains.py."""
        parts = split_chain(name)
        if parts is None:
            return _origin(self, scope, name, frozenset())
        holder, rest = parts
        alias = holder_alias(scope, holder) if "." not in holder else None
        if alias is not None:
            return self.origin(scope, alias + rest)
        found = _origin(self, scope, holder, frozenset())
        return Origin(found.scope, found.name + rest) if found is not None else None

    @property
    def processes(self) -> Processes:
        """Which code of the input runs on every process (analysis/effects/processes.py),
        solved once for the analysis and the rules."""
        if self._processes is None:
            self._processes = Processes(self.index)
        return self._processes

    @property
    def loaders(self) -> set[str]:
        """Every loader a training or evaluation loop draws from."""
        return {*self.train_loaders, *self.eval_loaders}

    def chain_origin(self, scope: Scope, expr: ast.expr | None) -> Origin | None:
        """Where the object `expr` names is made. An object held on another object
        (`self.cfg.optimiser`, `config.scheduler`) is named by its attribute chain, rooted
        where the root is made: `Origin(Trainer.__init__, "self.cfg.optimiser")`."""
        name = patterns.name_of(expr) or chain_text(expr)
        return self.origin(scope, name) if name is not None else None

    def chain_bindings(self, scope: Scope, chain: str) -> list[Binding]:
        """`self.cfg.optimiser = SGD(...)` in `scope`: the bindings of an attribute chain
        (the index binds names and `self.x` only); [] for a plain name or `self.x`."""
        if "[" not in chain and chain.count(".") < (2 if chain.startswith("self.") else 1):
            return []
        found, stack = [], list(ast.iter_child_nodes(scope.node))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            stack.extend(ast.iter_child_nodes(node))
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target, value = chain_text(node.targets[0]), node.value
            if target != chain and isinstance(value, ast.Dict) and target is not None:
                # `self.optimizers = {"g": Adam(...), ...}` binds `self.optimizers['g']`
                entries = {f"{target}[{key_text(k)}]": v
                           for k, v in zip(value.keys, value.values) if patterns.string_value(k)}  # fmt: skip
                target, value = (chain, entries[chain]) if chain in entries else (None, None)
            if target != chain:
                continue
            statement = self.index.statement_of_small(node)
            if statement is not None:
                found.append(Binding(chain, "assign", statement, value, small=node))
        found.sort(key=lambda b: (b.small.lineno, b.small.col_offset))
        return found

    def role(self, scope: Scope, name: str) -> str | None:
        """model / optimizer / loader / scheduler for a name as seen from `scope`."""
        found = self.origin(scope, name)
        if found is None or not self.held(found):
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

    def held(self, found: Origin) -> bool:
        """Is `found` where the training objects are made: the owner, or the method of the
        owner's class that makes (and prepares) this object (`homes`)? A Trainer's `self.x`
        is one object in every method of its class."""
        home = self.homes.get(found.name, self.owner)
        if found.scope is home:
            return True
        if found.scope is self.owner:  # not the owner's own name prepared in a function
            return home is self.owner or is_method(home)  # (module code's `model` after
            # `train()` made and prepared its own: function_homes.py)
        return (
            found.name.startswith(patterns.SELF + ".")
            and is_method(found.scope)
            and is_method(home)
            and found.scope.parent is home.parent
        )

    def device_names(self, scope: Scope) -> set[str]:
        names: set[str] = set()
        current: Scope | None = scope
        methods = {id(m) for m in class_methods(scope)}
        while current is not None:
            for binding in self.device_bindings:
                bound_in = binding.statement.block.scope
                if bound_in is current or (  # a Trainer's `self.device`, seen by its methods
                    binding.name.startswith(patterns.SELF + ".") and id(bound_in) in methods
                ):
                    names.add(binding.name)
                if (
                    bound_in is current
                    and isinstance(binding.value, ast.Name)
                    and (binding.value.id in current.params)
                ):  # `self.gpu_id = gpu_id`: the parameter is that device too
                    names.add(binding.value.id)
            for name in current.params:
                if patterns.looks_like_device_name(name):
                    names.add(name)
            names.update(n for n in current.bindings if self.rank_kind(current, n) in RANK_KINDS)
            names.update(n for n in current.uses if n.startswith(patterns.SELF + ".") and (
                self.rank_kind(current, n) in RANK_KINDS))  # a Trainer's `self.gpu_id`  # fmt: skip
            current = current.parent
        launch = self.distributed.launch  # `args.gpu` holding this process's device index
        if launch is not None:
            names.update(f"{launch.base}.{a}" for a, k in launch.kinds.items() if k in RANK_KINDS)
        return names

    def rank_kind(self, scope: Scope, name: str) -> str | None:
        """process_index / local_process_index / num_processes for a name holding one (MIG010)."""
        found = self.origin(scope, name)
        return self.distributed.kind_of(found.scope, found.name) if found is not None else None
