"""Native torch.distributed in a training script: the pieces MIG010 takes apart.

Read from the syntactic index (index.py), without walking the tree again:
- process-group set-up and tear-down (`init_process_group`, `destroy_process_group`,
  `torch.cuda.set_device`, MASTER_ADDR/PORT), and `setup()`/`cleanup()` helpers doing only that;
- `DistributedDataParallel` wrappers and the plain model each wraps (`ddp_model` -> `model`);
- `DistributedSampler`s, the loaders they feed and the `shuffle` they stand for; `set_epoch`;
- `mp.spawn` entry points and the spawned function's rank / world-size parameters;
- names holding a rank or the world size (`int(os.environ["LOCAL_RANK"])`, `dist.get_rank()`);
- barriers, all-reduces of metrics, other collectives;
- what is recognised but never guessed at (RPC, FSDP, tensor parallel, processes started by
  hand): findings that stop the migration of the file.
roles.py asks `unwrapped()` and `launch_param()` so that its roles see the plain model. The
facts and vocabulary live in distributed_facts.py; wrappers, samplers and metric all-reduces are
read by distributed_objects.py.
"""

from __future__ import annotations

import ast

from migrator.analysis import patterns
from migrator.analysis.distributed_facts import (
    ALL_REDUCE,
    BARRIER,
    COLLECTIVES,
    DDP_CLASSES,
    DESTROY,
    ENV_KINDS,
    GROUP_CALLS,
    INIT,
    LAUNCH_ARGUMENTS,
    LAUNCH_ENV,
    LOCAL_NAME,
    LOCAL_PROCESS_INDEX,
    NUM_PROCESSES,
    PROCESS_INDEX,
    PURE_CALLS,
    RANK_CALLS,
    RANK_KINDS,
    RPC_PREFIXES,
    SAMPLER_CLASSES,
    SHARDING_PREFIXES,
    SPAWN_CALLS,
    DistributedFacts,
    RankName,
    Spawn,
    Worker,
    keyword_value,
    whole_statement,
)
from migrator.analysis.distributed_objects import ObjectReader
from migrator.analysis.distributed_processes import ProcessReader
from migrator.analysis.imports import dotted_name
from migrator.analysis.index import CallSite, Line, ModuleIndex, Scope
from migrator.analysis.launch_attributes import read_launch_attributes
from migrator.analysis.syntax import call_args, name_value
from migrator.findings import Finding

__all__ = ["RANK_KINDS", "DistributedFacts", "read_distributed"]


def read_distributed(index: ModuleIndex) -> DistributedFacts:
    reader = _Reader(index)
    reader.run()
    return reader.facts


def env_kind(expr: ast.AST | None, imports, environ=frozenset({"os.environ"})) -> str | None:
    """The rank kind of `int(os.environ["LOCAL_RANK"])`, `int(os.getenv("RANK", 0))`, ...;
    `environ`: the names holding the environment (`env_dict = {k: os.environ[k] for k in ...}`)."""
    if not isinstance(expr, ast.Call) or imports.qualify(expr.func) != "int":
        return None
    args = call_args(expr)
    if not args:
        return None
    inner = args[0].value
    key = None
    if isinstance(inner, ast.Subscript) and dotted_name(inner.value) in environ:
        key = patterns.string_value(inner.slice)
    elif isinstance(inner, ast.Call) and imports.qualify(inner.func) in ("os.environ.get",
                                                                         "os.getenv"):  # fmt: skip
        inner_args = call_args(inner)
        key = patterns.string_value(inner_args[0].value) if inner_args else None
    return ENV_KINDS.get(key or "")


def is_pure(expr: ast.AST, imports) -> bool:
    """No calls other than reading the environment or asking torch how many GPUs there are."""
    return not any(
        isinstance(node, ast.Call) and imports.qualify(node.func) not in PURE_CALLS
        for node in ast.walk(expr)
    )


class _Reader(ObjectReader, ProcessReader):
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.imports = index.imports
        self.facts = DistributedFacts()
        self.sites = [(site, site.callee or "") for site in index.calls()]
        self.environ = {"os.environ", *_environment_copies(index)}

    def run(self) -> None:
        self._processes_started_by_hand()
        self._worker_started_elsewhere()
        if self.facts.blocking or not any(
            q.startswith(("torch.distributed", "torch.multiprocessing")) or q in DDP_CLASSES
            or q in SAMPLER_CLASSES for _, q in self.sites
        ):  # fmt: skip
            return
        for site, qualified in self.sites:
            if qualified.startswith(RPC_PREFIXES):
                self._block(site.node, "MIG903", "torch.distributed.rpc is not data parallel "
                            "training; migrate by hand")  # fmt: skip
            elif qualified.startswith(SHARDING_PREFIXES) or patterns.last_part(qualified) in (
                "FullyShardedDataParallel", "fully_shard", "parallelize_module",
            ):  # fmt: skip
                self._block(site.node, "MIG904", f"`{patterns.last_part(qualified)}` shards the "
                            "model (FSDP / tensor parallel); migrate by hand")  # fmt: skip
        if self.facts.blocking:
            return
        self._helpers()
        self._launch_attributes()
        if self.facts.blocking:
            return
        self._spawns()
        self._workers()
        self._constructor_ranks()
        self._rank_names()
        self._rank_attributes()
        for site, qualified in self.sites:
            self._classify(site, qualified)
        self._launch_environment()

    # -- set-up and tear-down ----------------------------------------------------------------
    def _helpers(self) -> None:
        module = self.index.module_scope
        for scope in module.children:
            if scope.kind != "function" or scope.body is None:
                continue
            if not self._only_group_code(scope.body.statements):
                continue
            sites = [s for s, _ in self.sites if name_value(s.node.func) == scope.name]
            if not all(whole_statement(s) for s in sites):
                continue
            self.facts.helpers.append(scope)
            self.facts.removed_calls.extend(sites)

    def _only_group_code(self, statements) -> bool:
        """Only process-group set-up/tear-down (and the variables it reads): a helper to drop."""
        groups = 0
        for statement in statements:
            body = self.index.block(statement) if isinstance(statement, ast.If) else None
            if (
                body is not None
                and not statement.orelse
                and body.kind != "suite"
                and is_pure(statement.test, self.imports)
            ):
                if not self._only_group_code(body.statements):
                    return False
                groups += 1
                continue
            if not isinstance(statement, Line):
                return False
            for small in statement.body:
                if isinstance(small, ast.Expr) and isinstance(small.value, ast.Call):
                    qualified = self.imports.qualify(small.value.func)
                    if qualified in GROUP_CALLS or qualified == BARRIER:
                        groups += qualified in (INIT, DESTROY)
                        continue
                    if self._sets_launch_environment(small.value):
                        continue
                if isinstance(small, ast.Expr) and _is_string(small.value):
                    continue  # docstring
                if isinstance(small, ast.Assign) and is_pure(small.value, self.imports) and all(
                    isinstance(t, ast.Name) or self._launch_environment_key(t)
                    for t in small.targets
                ):  # fmt: skip
                    continue
                if not isinstance(small, ast.Pass):
                    return False
        return groups > 0

    def _launch_environment_key(self, target: ast.AST) -> bool:
        if not isinstance(target, ast.Subscript) or dotted_name(target.value) != "os.environ":
            return False
        return patterns.string_value(target.slice) in LAUNCH_ENV

    def _sets_launch_environment(self, call: ast.Call) -> bool:
        if not isinstance(call.func, ast.Attribute) or call.func.attr != "setdefault":
            return False  # (the cheap test first: this runs for every call of the file)
        if self.imports.qualify(call.func) != "os.environ.setdefault":
            return False
        args = call_args(call)
        return bool(args) and patterns.string_value(args[0].value) in LAUNCH_ENV

    def _launch_environment(self) -> None:
        helpers = {id(h) for h in self.facts.helpers}
        for statement in self.index.statement_of.values():
            if id(statement.block.scope) in helpers:
                continue
            if not isinstance(statement.node, Line):
                continue
            for small in statement.node.body:
                if (
                    isinstance(small, ast.Assign)
                    and len(small.targets) == 1
                    and (self._launch_environment_key(small.targets[0]))
                ):
                    self.facts.removed_smalls.append((small, statement))

    def _launch_attributes(self) -> None:
        launch = read_launch_attributes(self.index, self.sites, lambda e: is_pure(e, self.imports))
        self.facts.launch = launch
        for small, attribute in launch.impure:
            self._block(small, "MIG907", f"`{launch.base}.{attribute}` is computed with a call "
                        f"at line {small.lineno}; migrate by hand")  # fmt: skip

    # -- spawn entry points and rank names ----------------------------------------------------
    def _spawns(self) -> None:
        for site, qualified in self.sites:
            if qualified not in SPAWN_CALLS:
                continue
            function = keyword_value(site.node, "fn", 0)
            target = None
            if name_value(function) is not None:
                target = self.index.functions.get(name_value(function))
            arguments = keyword_value(site.node, "args", 1)
            nprocs = keyword_value(site.node, "nprocs", 2)
            if arguments is None:
                arguments = ast.Tuple(elts=[])
            if (
                target is None
                or not isinstance(arguments, (ast.Tuple, ast.List))
                or not (whole_statement(site))
            ):
                self._block(site.node, "MIG907", "cannot tell which function mp.spawn runs, or "
                            "with which arguments; migrate by hand")  # fmt: skip
                continue
            params = [p for p in target.params if not p.startswith("*")]
            values = [e.value if isinstance(e, ast.Starred) else e for e in arguments.elts]
            if not params or len(values) > len(params) - 1:
                self._block(site.node, "MIG907", "mp.spawn passes arguments the spawned "
                            "function does not take; migrate by hand")  # fmt: skip
                continue
            rank = params[0]
            if any(target.assigns(p) for p in params):
                self._block(site.node, "MIG907", "the spawned function rebinds its rank or "
                            "arguments; migrate by hand")  # fmt: skip
                continue
            stored = _stored_in_attribute(target, rank)
            if stored is not None and not self.facts.launch.covers(stored.targets[0]):
                where = dotted_name(stored.targets[0])
                self._block(stored, "MIG907", f"the spawned function stores its rank in "
                            f"`{where}`, where other code reads it; migrate by hand")  # fmt: skip
                continue
            kind = LOCAL_PROCESS_INDEX if LOCAL_NAME.search(rank) else PROCESS_INDEX
            self.facts.rank_names.append(RankName(target, rank, kind))
            removed, kept = [rank], []
            code = self.index.source.text_of
            for param, value in zip(params[1:], values):
                if nprocs is not None and code(value) == code(nprocs):
                    removed.append(param)
                    self.facts.rank_names.append(RankName(target, param, NUM_PROCESSES))
                else:
                    kept.append(value)
            self.facts.spawns.append(Spawn(site, target, removed, kept, nprocs))
            self.facts.workers.append(Worker(target, removed))

    def _workers(self) -> None:
        """`def train(rank, world_size): setup(rank, world_size)` with no mp.spawn in sight: the
        parameters that reach init_process_group's `rank=` / `world_size=` are the launcher's."""
        for site, qualified in self.sites:
            if qualified != INIT:
                continue
            for keyword, kind in (("rank", PROCESS_INDEX), ("world_size", NUM_PROCESSES)):
                value = keyword_value(site.node, keyword)
                if name_value(value) not in site.scope.params:
                    continue
                for scope, param in self._param_sources(site.scope, name_value(value)):
                    if self.facts.kind_of(scope, param) is not None:
                        continue
                    self.facts.rank_names.append(RankName(scope, param, kind))
                    worker = next((w for w in self.facts.workers if w.scope is scope), None)
                    if worker is None:
                        worker = Worker(scope, [])
                        self.facts.workers.append(worker)
                    worker.removed_params.append(param)

    def _param_sources(self, scope: Scope, param: str) -> list[tuple[Scope, str]]:
        """The worker parameters a set-up helper's parameter is called with."""
        if scope not in self.facts.helpers:
            return [(scope, param)]  # its direct callers lose the argument with it
        sources = []
        position = scope.params.index(param)
        for site, _ in self.sites:
            if name_value(site.node.func) != scope.name:
                continue
            value = keyword_value(site.node, param, position)
            if name_value(value) in site.scope.params:
                sources.append((site.scope, name_value(value)))
            elif value is not None and name_value(value) is None:
                self._block(site.node, "MIG907", "the process rank or world size handed to the "
                            "set-up helper is computed by hand; migrate by hand")  # fmt: skip
        return sources

    def _rank_names(self) -> None:
        for scope in self.index.scopes:
            for name, bindings in scope.bindings.items():
                if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].unpacked:
                    continue  # rebound ranks stay as they are: still valid under a launcher
                value = bindings[0].value
                kind = env_kind(value, self.imports, self.environ)
                if kind is None and isinstance(value, ast.Call):
                    kind = RANK_CALLS.get(self.imports.qualify(value.func) or "")
                if kind is not None:
                    self.facts.rank_names.append(RankName(scope, name, kind, bindings[0]))

    def _rank_attributes(self) -> None:
        declared = any(site.method == "add_argument" and any(
            patterns.string_value(a.value) in LAUNCH_ARGUMENTS for a in call_args(site.node)
        ) for site, _ in self.sites)  # fmt: skip
        for scope in self.index.scopes if declared else []:
            for uses in scope.uses.values():
                self.facts.rank_attributes.extend(
                    u for u in uses if u.kind == "attr" and u.attr == "local_rank"
                )

    # -- everything else, call by call -------------------------------------------------------
    def _classify(self, site: CallSite, qualified: str) -> None:
        facts = self.facts
        if id(site.scope) in {id(h) for h in facts.helpers}:
            return
        if qualified in GROUP_CALLS:
            if not whole_statement(site):
                self._block(site.node, "MIG907", f"`{patterns.last_part(qualified)}` is used as "
                            "a value; migrate by hand")  # fmt: skip
                return
            rank = keyword_value(site.node, "rank")
            launch = self.facts.launch
            if (
                qualified == INIT
                and rank is not None
                and not (self._plain_rank(site.scope, rank) or launch.covers(rank))
            ):
                kept = dotted_name(rank) if isinstance(rank, ast.Attribute) else None
                self._block(
                    site.node,
                    "MIG907",
                    (
                        f"the process rank is kept in `{kept}`, where other code reads it; "
                        if kept
                        else "the process rank is computed by hand; "
                    )
                    + "migrate by hand",
                )
                return
            world_size = keyword_value(site.node, "world_size")
            if (
                qualified == INIT
                and isinstance(world_size, ast.Attribute)
                and not (launch.covers(world_size))
            ):
                self._block(site.node, "MIG907", f"the world size is kept in "
                            f"`{dotted_name(world_size)}`, which other code reads as a number; "
                            "migrate by hand")  # fmt: skip
                return
            facts.removed_calls.append(site)
        elif self._sets_launch_environment(site.node) and whole_statement(site):
            facts.removed_calls.append(site)
        elif qualified in DDP_CLASSES:
            self._wrap(site)
        elif qualified in SAMPLER_CLASSES:
            self._sampler(site)
        elif (
            site.method == "set_epoch"
            and isinstance(site.receiver, ast.Attribute)
            and (site.receiver.attr == "sampler" and whole_statement(site))
        ):
            facts.removed_calls.append(site)
        elif qualified in RANK_CALLS:
            small = site.small
            if not (isinstance(small, ast.Assign) and small.value is site.node and any(
                r.binding is not None and r.binding.small is small for r in facts.rank_names
            )):  # fmt: skip
                facts.rank_calls.append((site, RANK_CALLS[qualified]))
        elif qualified == BARRIER:
            facts.barriers.append(site)
        elif qualified == ALL_REDUCE and self._reduction(site):
            pass
        elif qualified.startswith("torch.distributed.") and (
            patterns.last_part(qualified) in COLLECTIVES
        ):
            facts.collectives.append(site)

    def _plain_rank(self, scope: Scope, rank: ast.AST) -> bool:
        name = name_value(rank)
        if name is None:  # `rank=int(env_dict["RANK"])`: the launcher's
            return env_kind(rank, self.imports, self.environ) == PROCESS_INDEX
        if name in scope.params:
            return True
        return self.facts.kind_of(scope, name) == PROCESS_INDEX

    def _block(self, node, code: str, message: str, level: str = "warning") -> None:
        self.facts.findings.append(Finding(code=code, message=message, node=node, level=level))
        self.facts.blocking = True


def _stored_in_attribute(scope: Scope, name: str) -> ast.Assign | None:
    """`args.gpu = gpu`: the rank parameter copied into an attribute other functions read."""
    for use in scope.uses.get(name, []):
        line = use.statement.node
        if not isinstance(line, Line):
            continue
        for small in line.body:
            if (
                isinstance(small, ast.Assign)
                and small.value is use.node
                and any(isinstance(t, ast.Attribute) for t in small.targets)
            ):
                return small
    return None


def _is_string(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Constant) and isinstance(expr.value, (str, bytes))


def _environment_copies(index: ModuleIndex) -> set[str]:
    """Names bound once to a copy of the environment: `{k: os.environ[k] for k in keys}`,
    `dict(os.environ)`, `os.environ.copy()` (pytorch/examples' distributed/ddp example)."""
    found = set()
    for scope in index.scopes:
        for name, bindings in scope.bindings.items():
            value = bindings[0].value if len(bindings) == 1 else None
            if isinstance(value, ast.DictComp):
                value = value.value.value if isinstance(value.value, ast.Subscript) else None
            elif isinstance(value, ast.Call) and not value.keywords and (
                dotted_name(value.func) == "os.environ.copy"
                or (dotted_name(value.func) == "dict" and len(value.args) == 1)
            ):  # fmt: skip
                value = value.args[0] if value.args else value.func.value
            if value is not None and dotted_name(value) == "os.environ":
                found.add(name)
    return found
