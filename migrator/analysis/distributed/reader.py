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
read by distributed_objects.py, spawn entry points and rank names by distributed_ranks.py, ranks
kept on `args` by launch_attributes.py, processes started without a group by
distributed_processes.py.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.facts import (
    ALL_REDUCE,
    BARRIER,
    COLLECTIVES,
    DDP_CLASSES,
    DESTROY,
    ENV_KINDS,
    GROUP_CALLS,
    INIT,
    LAUNCH_ENV,
    PROCESS_INDEX,
    PURE_CALLS,
    RANK_CALLS,
    RANK_KINDS,
    RPC_PREFIXES,
    SAMPLER_CLASSES,
    SHARDING_PREFIXES,
    DistributedFacts,
    keyword_value,
    whole_statement,
)
from migrator.analysis.distributed.launch_attributes import read_launch_attributes
from migrator.analysis.distributed.objects import ObjectReader
from migrator.analysis.distributed.processes import ProcessReader
from migrator.analysis.distributed.ranks import RankReader, env_kind, environment_copies
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import CallSite, Line, ModuleIndex, Scope
from migrator.analysis.syntax.views import call_args, name_value
from migrator.findings import Finding

__all__ = ["RANK_KINDS", "DistributedFacts", "env_kind", "is_pure", "read_distributed"]


def read_distributed(index: ModuleIndex) -> DistributedFacts:
    reader = _Reader(index)
    reader.run()
    return reader.facts


def is_pure(expr: ast.AST, imports) -> bool:
    """No calls other than reading the environment or asking torch how many GPUs there are."""
    return not any(
        isinstance(node, ast.Call) and imports.qualify(node.func) not in PURE_CALLS
        for node in ast.walk(expr)
    )


class _Reader(ObjectReader, ProcessReader, RankReader):
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.imports = index.imports
        self.facts = DistributedFacts()
        self.sites = [(site, site.callee or "") for site in index.calls()]
        self.environ = {"os.environ", *environment_copies(index)}

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
        self._process_counts()
        self._workers()
        self._constructor_ranks()
        self._rank_names()
        self._setup_only_ranks()
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
        """`os.environ["MASTER_ADDR"]`, and the rank and world size the launcher sets
        (`os.environ["RANK"] = str(rank)` before a hand-made process group)."""
        if not isinstance(target, ast.Subscript) or dotted_name(target.value) != "os.environ":
            return False
        return patterns.string_value(target.slice) in (*LAUNCH_ENV, *ENV_KINDS)

    def _sets_launch_environment(self, call: ast.Call) -> bool:
        if not isinstance(call.func, ast.Attribute) or call.func.attr != "setdefault":
            return False  # (the cheap test first: this runs for every call of the file)
        if self.imports.qualify(call.func) != "os.environ.setdefault":
            return False
        args = call_args(call)
        return bool(args) and patterns.string_value(args[0].value) in LAUNCH_ENV

    def _launch_environment(self) -> None:
        """The writes of the launch environment go with the set-up they served, except a
        rendezvous address (`MASTER_ADDR`, `MASTER_PORT`) the program still reads as
        `os.environ[...]`: without its default it would raise KeyError on one process."""
        helpers = {id(h) for h in self.facts.helpers}
        read = self._environment_reads()
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
                    and patterns.string_value(small.targets[0].slice) not in read
                ):
                    self.facts.removed_smalls.append((small, statement))

    def _environment_reads(self) -> set[str]:
        """The rendezvous keys read as `os.environ["MASTER_ADDR"]` (not `.get(...)`)."""
        return {
            key
            for node in ast.walk(self.index.tree)
            if isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and dotted_name(node.value) == "os.environ"
            and (key := patterns.string_value(node.slice)) in LAUNCH_ENV
        }

    def _launch_attributes(self) -> None:
        launch = read_launch_attributes(self.index, self.sites, lambda e: is_pure(e, self.imports))
        self.facts.launch = launch
        for small, attribute in launch.impure:
            self._block(small, "MIG907", f"`{launch.base}.{attribute}` is computed with a call "
                        f"at line {small.lineno}; migrate by hand")  # fmt: skip

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


def _is_string(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Constant) and isinstance(expr.value, (str, bytes))
