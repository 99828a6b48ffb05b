"""The facts analysis hands to the rules, and how a name is traced to where it is made.

`TrainingFacts` holds the roles; `origin(scope, name)` follows a helper's parameter back through
the call sites that pass it (`train_epoch(model, loader, ...)` from `main()`), a Trainer's
`self.x` to the method that binds it (`__init__`), and a free name to its enclosing scope.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.reader import RANK_KINDS, DistributedFacts
from migrator.analysis.model.chains import (
    chain_text,
    held_alias,
    holder_alias,
    key_text,
    split_chain,
)
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Binding, CallSite, Loop, ModuleIndex, Scope, Statement
from migrator.findings import Finding

# The name of a DataLoader built where a loop uses it (`enumerate(DataLoader(...))`) until
# MIG006 names it: a data region's loader (`DataRegion.loader.name`).
INLINE_LOADER = "<DataLoader built in place>"


@dataclass(frozen=True)
class Origin:
    scope: Scope
    name: str


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
    origins: dict[tuple[int, str], Origin | None] = field(default_factory=dict)
    distributed: DistributedFacts = field(default_factory=DistributedFacts)  # MIG010
    # The function that creates some training objects and receives the others: its
    # parameters are traced no further than itself (prepared where the objects meet).
    meeting: Scope | None = None
    # Objects of a class prepared in another method than the owner's, where they are made
    # (a Trainer's `self.model`/`self.optimizer` in `__init__`, its loader in `fit_epoch()`):
    # name -> that method (homes.py).
    homes: dict[str, Scope] = field(default_factory=dict)
    # A train/eval epoch function fed the training loader and plain eval loaders
    # (shared_epochs.py): a SharedEpoch each.
    shared_epochs: list = field(default_factory=list)

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


def is_method(scope: Scope | None) -> bool:
    return (
        scope is not None
        and scope.kind == "function"
        and scope.parent is not None
        and scope.parent.kind == "class"
    )


def instance_origin(scope: Scope, name: str) -> Origin | None:
    """Where a Trainer's `self.x` is made: `__init__`, else the one method that binds it."""
    while scope is not None and not is_method(scope):
        scope = scope.parent
    if scope is None:
        return None
    methods = [m for m in scope.parent.children if m.kind == "function" and m.assigns(name)]
    methods.sort(key=lambda m: m.name != "__init__")
    made = [m for m in methods if not all(_placeholder(b) for b in m.assigns(name))]
    if len(made) == 1 and len(methods) > 1:  # `self.optimizer = None` in __init__, made in run()
        return Origin(made[0], name)
    if len(methods) == 1 or (methods and methods[0].name == "__init__"):
        return Origin(methods[0], name)
    return None


def _placeholder(binding: Binding) -> bool:
    """`self.optimizer = None`: a slot filled by the method that makes the object."""
    value = binding.element if binding.unpacked else binding.value
    return isinstance(value, ast.Constant) and value.value is None


def class_methods(scope: Scope) -> list[Scope]:
    """The methods of the class `scope` is a method of (itself included)."""
    if not is_method(scope):
        return [scope]
    return [m for m in scope.parent.children if m.kind == "function"]


def _origin(facts: TrainingFacts, scope: Scope, name: str, seen: frozenset) -> Origin | None:
    key = (id(scope), name)
    if key in facts.origins:
        return facts.origins[key]
    if key in seen:
        return None
    seen = seen | {key}
    result: Origin | None
    if name.startswith(patterns.SELF + "."):
        result = instance_origin(scope, name)
    elif facts.distributed.launch_param(scope, name):  # the rank `mp.spawn` passes
        result = Origin(scope, name)
    elif scope.kind == "function" and name in scope.params:
        results = set()
        sites = call_sites_of(facts.index, scope)
        if not sites or scope is facts.meeting:
            # No caller in this file (a driver elsewhere calls it), or the function where the
            # training objects meet: the parameter is the object, prepared in this function.
            results.add(Origin(scope, name))
        for site in sites if scope is not facts.meeting else []:
            argument = argument_for(site.node, scope, name)
            if argument is None and none_default(scope, name) and not scales(facts, scope, name):
                continue  # `run_epoch(model, val_loader)`: no optimizer at this call
            if patterns.name_of(argument) is not None:
                results.add(_origin(facts, site.scope, patterns.name_of(argument), seen))
            else:
                results.add(None)
        result = results.pop() if len(results) == 1 else None
    elif scope.kind == "module" or scope.is_local(name):
        wrapped = facts.distributed.unwrapped(scope, name)  # `ddp_model = DDP(model)` is `model`
        held = held_alias(scope, name, facts.index.imports)  # `model = self.cfg.model`
        result = _origin(facts, scope, wrapped, seen) if wrapped else Origin(scope, name)
        target = facts.origin(scope, held) if held is not None and not wrapped else None
        if target is not None and target.scope is not scope:  # held before this function runs
            result = target
    else:
        enclosing = scope.parent
        while enclosing is not None and enclosing.kind == "class":
            enclosing = enclosing.parent
        result = (
            _origin(facts, enclosing, name, seen) if enclosing is not None else Origin(scope, name)
        )
    facts.origins[key] = result
    return result


def call_sites_of(index: ModuleIndex, function: Scope) -> list[CallSite]:
    if is_method(function):  # `self.train_epoch(...)` from a sibling method
        return [
            site for site in index.calls_named(f"{patterns.SELF}.{function.name}")
            if site.scope.parent is function.parent
        ]  # fmt: skip
    return list(index.calls_named(function.name))


def handed_to_parameter(index: ModuleIndex, use) -> tuple[Scope, str] | None:
    """(the module function, its parameter) that an argument use hands a name to
    (`train(model, loader, device)`), when that parameter is nothing but what it receives
    there (no other binding of it)."""
    function = index.functions.get(dotted_name(use.call.func) or "")
    if function is None or function.kind != "function":
        return None
    for parameter in function.params:
        if argument_for(use.call, function, parameter) is use.node:
            bindings = function.bindings.get(parameter, [])
            return (function, parameter) if all(b.kind == "param" for b in bindings) else None
    return None


def argument_for(call: ast.Call, function: Scope, param: str) -> ast.expr | None:
    positional = [p for p in function.params if not p.startswith("*")]
    if is_method(function):
        positional = positional[1:]  # `self` is not passed
    for item in call.keywords:
        if item.arg == param:
            return item.value
    position = positional.index(param) if param in positional else -1
    plain = [a for a in call.args if not isinstance(a, ast.Starred)]
    if 0 <= position < len(plain):
        return plain[position]
    return None


def none_default(function: Scope, param: str) -> bool:
    """`optimizer=None`, never re-bound in the function: a call that omits it passes no
    object (`run_epoch(model, val_loader)` evaluates; the call passing one trains)."""
    default = param_default(function, param)
    return (
        isinstance(default, ast.Constant)
        and default.value is None
        and not (function.assigns(param))
    )


def scales(facts: TrainingFacts, function: Scope, param: str) -> bool:
    """`scaler.scale(loss)` outside a train/eval epoch function: left out, it keeps MIG020's way."""
    scopes = [function, *function.descendants()]
    uses = [use.attr for scope in scopes for use in scope.uses.get(param, []) if use.kind == "attr"]
    shared = any(epoch.function is function for epoch in facts.shared_epochs)
    return not shared and bool({"scale", "unscale_", "get_scale"} & set(uses))


def param_default(function: Scope, param: str) -> ast.expr | None:
    """The default value of a function's parameter (None: it has none)."""
    arguments = function.node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = list(zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults))
    pairs += list(zip(arguments.kwonlyargs, arguments.kw_defaults))
    return next((d for a, d in pairs if a.arg == param), None)


def bindings_of(origin: Origin | None) -> list[Binding]:
    if origin is None:
        return []
    return origin.scope.assigns(origin.name)


def value_call(binding: Binding) -> ast.Call | None:
    value = binding.element if binding.element is not None else binding.value
    if binding.unpacked and binding.element is None:
        return None
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and (value.func.attr in ("to", "cuda"))
    ):
        value = value.func.value  # `Net().to(device)` is built by `Net()`
    return value if isinstance(value, ast.Call) else None


def scopes_seeing(scope: Scope, name: str) -> list[Scope]:
    """Where `name`, as `scope` binds it, is read: `scope` and the nested scopes where it
    still means that variable; for an attribute of `self` (`self.writer` set in `__init__`),
    those of every method of the class."""
    if name.startswith("self."):
        return [s for m in class_methods(scope) for s in visible_scopes(m, name)]
    return visible_scopes(scope, name)


def visible_scopes(scope: Scope, name: str) -> list[Scope]:
    """`scope` and the nested scopes where `name` still means `scope`'s variable."""
    found = [scope]
    for child in scope.children:
        if name in child.params or child.is_local(name):
            continue
        found.extend(visible_scopes(child, name))
    return found
