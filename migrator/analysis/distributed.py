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
roles.py asks `unwrapped()` and `launch_param()` so that its roles see the plain model.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from migrator.analysis import patterns
from migrator.analysis.distributed_facts import (
    ALL_REDUCE, BARRIER, COLLECTIVES, DDP_CLASSES, DDP_OPTIONS_KEPT, DESTROY, ENV_KINDS,
    GROUP_CALLS, INIT, LAUNCH_ARGUMENTS, LAUNCH_ENV, LOCAL_NAME, LOCAL_PROCESS_INDEX, NUM_PROCESSES,
    PROCESS_CLASSES, PROCESS_INDEX, PURE_CALLS, RANK_CALLS, RANK_KINDS, REDUCE_OPS,
    RPC_PREFIXES, SAMPLER_CLASSES, SHARDING_PREFIXES, SPAWN_CALLS, DistributedFacts, RankName,
    Reduction, Sampler, Spawn, Wrap,
)
from migrator.analysis.imports import dotted_name
from migrator.analysis.index import CallSite, ModuleIndex, Scope
from migrator.findings import Finding

__all__ = ["RANK_KINDS", "DistributedFacts", "read_distributed"]


def read_distributed(index: ModuleIndex) -> DistributedFacts:
    reader = _Reader(index)
    reader.run()
    return reader.facts


def _whole_statement(site: CallSite) -> bool:
    return isinstance(site.small, cst.Expr) and site.small.value is site.node


def _keyword(call: cst.Call, name: str, position: Optional[int] = None):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def env_kind(expr: Optional[cst.BaseExpression], imports) -> Optional[str]:
    """The rank kind of `int(os.environ["LOCAL_RANK"])`, `int(os.getenv("RANK", 0))`, ..."""
    if not isinstance(expr, cst.Call) or imports.qualify(expr.func) != "int" or not expr.args:
        return None
    inner = expr.args[0].value
    key = None
    if isinstance(inner, cst.Subscript) and dotted_name(inner.value) == "os.environ":
        slice_ = inner.slice[0].slice if len(inner.slice) == 1 else None
        key = patterns.string_value(slice_.value) if isinstance(slice_, cst.Index) else None
    elif isinstance(inner, cst.Call) and imports.qualify(inner.func) in ("os.environ.get",
                                                                         "os.getenv"):  # fmt: skip
        key = patterns.string_value(inner.args[0].value) if inner.args else None
    return ENV_KINDS.get(key or "")


def is_pure(expr: cst.CSTNode, imports) -> bool:
    """No calls other than reading the environment or asking torch how many GPUs there are."""
    found = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if imports.qualify(node.func) not in PURE_CALLS:
                found.append(node)

    expr.visit(_Calls())
    return not found


class _Reader:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.imports = index.imports
        self.facts = DistributedFacts()
        self.sites = [(site, site.callee or "") for site in index.calls()]

    def run(self) -> None:
        self._processes_started_by_hand()
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
        self._spawns()
        self._rank_names()
        self._rank_attributes()
        for site, qualified in self.sites:
            self._classify(site, qualified)
        self._launch_environment()

    # -- set-up and tear-down ----------------------------------------------------------------
    def _processes_started_by_hand(self) -> None:
        for site, qualified in self.sites:
            if qualified not in PROCESS_CLASSES:
                continue
            if any(q == INIT for _, q in self.sites):
                self._block(site.node, "MIG907", "processes started by hand with Process(...) "
                            "join a process group; launch with `migrate launch` and migrate by "
                            "hand")  # fmt: skip
            else:
                self._block(site.node, "MIG908", "processes started by hand share a model "
                            "without a process group (Hogwild): nothing for Accelerate to take "
                            "over; left as it is", level="note")  # fmt: skip
            return

    def _helpers(self) -> None:
        module = self.index.module_scope
        for scope in module.children:
            if scope.kind != "function" or scope.body is None:
                continue
            if not self._only_group_code(scope.body.statements):
                continue
            sites = [s for s, _ in self.sites
                     if isinstance(s.node.func, cst.Name) and s.node.func.value == scope.name]
            if not all(_whole_statement(s) for s in sites):
                continue
            self.facts.helpers.append(scope)
            self.facts.removed_calls.extend(sites)

    def _only_group_code(self, statements) -> bool:
        """Only process-group set-up/tear-down (and the variables it reads): a helper to drop."""
        groups = 0
        for statement in statements:
            if isinstance(statement, cst.If) and statement.orelse is None and isinstance(
                statement.body, cst.IndentedBlock
            ) and is_pure(statement.test, self.imports):
                if not self._only_group_code(statement.body.body):
                    return False
                groups += 1
                continue
            if not isinstance(statement, cst.SimpleStatementLine):
                return False
            for small in statement.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    qualified = self.imports.qualify(small.value.func)
                    if qualified in GROUP_CALLS or qualified == BARRIER:
                        groups += qualified in (INIT, DESTROY)
                        continue
                    if self._sets_launch_environment(small.value):
                        continue
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString):
                    continue  # docstring
                if isinstance(small, cst.Assign) and is_pure(small.value, self.imports) and all(
                    isinstance(t.target, cst.Name) or self._launch_environment_key(t.target)
                    for t in small.targets
                ):  # fmt: skip
                    continue
                if not isinstance(small, cst.Pass):
                    return False
        return groups > 0

    def _launch_environment_key(self, target: cst.BaseExpression) -> bool:
        if not isinstance(target, cst.Subscript) or dotted_name(target.value) != "os.environ":
            return False
        element = target.slice[0].slice if len(target.slice) == 1 else None
        key = patterns.string_value(element.value) if isinstance(element, cst.Index) else None
        return key in LAUNCH_ENV

    def _sets_launch_environment(self, call: cst.Call) -> bool:
        return self.imports.qualify(call.func) == "os.environ.setdefault" and bool(call.args) and (
            patterns.string_value(call.args[0].value) in LAUNCH_ENV
        )  # fmt: skip

    def _launch_environment(self) -> None:
        helpers = {id(h) for h in self.facts.helpers}
        for statement in self.index.statement_of.values():
            if id(statement.block.scope) in helpers:
                continue
            if not isinstance(statement.node, cst.SimpleStatementLine):
                continue
            for small in statement.node.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and (
                    self._launch_environment_key(small.targets[0].target)
                ):
                    self.facts.removed_smalls.append((small, statement))

    # -- spawn entry points and rank names ----------------------------------------------------
    def _spawns(self) -> None:
        for site, qualified in self.sites:
            if qualified not in SPAWN_CALLS:
                continue
            function = _keyword(site.node, "fn", 0)
            target = None
            if isinstance(function, cst.Name):
                target = self.index.functions.get(function.value)
            arguments = _keyword(site.node, "args", 1)
            nprocs = _keyword(site.node, "nprocs", 2)
            if arguments is None:
                arguments = cst.Tuple(elements=[])
            if target is None or not isinstance(arguments, (cst.Tuple, cst.List)) or not (
                _whole_statement(site)
            ):
                self._block(site.node, "MIG907", "cannot tell which function mp.spawn runs, or "
                            "with which arguments; migrate by hand")  # fmt: skip
                continue
            params = [p for p in target.params if not p.startswith("*")]
            values = [e.value for e in arguments.elements]
            if not params or len(values) > len(params) - 1:
                self._block(site.node, "MIG907", "mp.spawn passes arguments the spawned "
                            "function does not take; migrate by hand")  # fmt: skip
                continue
            rank = params[0]
            if any(target.assigns(p) for p in params):
                self._block(site.node, "MIG907", "the spawned function rebinds its rank or "
                            "arguments; migrate by hand")  # fmt: skip
                continue
            kind = LOCAL_PROCESS_INDEX if LOCAL_NAME.search(rank) else PROCESS_INDEX
            self.facts.rank_names.append(RankName(target, rank, kind))
            removed, kept = [rank], []
            code = cst.Module(body=[]).code_for_node
            for param, value in zip(params[1:], values):
                if nprocs is not None and code(value) == code(nprocs):
                    removed.append(param)
                    self.facts.rank_names.append(RankName(target, param, NUM_PROCESSES))
                else:
                    kept.append(value)
            self.facts.spawns.append(Spawn(site, target, removed, kept, nprocs))

    def _rank_names(self) -> None:
        for scope in self.index.scopes:
            for name, bindings in scope.bindings.items():
                if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].unpacked:
                    continue  # rebound ranks stay as they are: still valid under a launcher
                value = bindings[0].value
                kind = env_kind(value, self.imports)
                if kind is None and isinstance(value, cst.Call):
                    kind = RANK_CALLS.get(self.imports.qualify(value.func) or "")
                if kind is not None:
                    self.facts.rank_names.append(RankName(scope, name, kind, bindings[0]))

    def _rank_attributes(self) -> None:
        declared = any(site.method == "add_argument" and any(
            patterns.string_value(a.value) in LAUNCH_ARGUMENTS for a in site.node.args
        ) for site, _ in self.sites)  # fmt: skip
        for scope in self.index.scopes if declared else []:
            for uses in scope.uses.values():
                self.facts.rank_attributes.extend(
                    u for u in uses if u.kind == "attr" and u.attr == "local_rank")

    # -- everything else, call by call -------------------------------------------------------
    def _classify(self, site: CallSite, qualified: str) -> None:
        facts = self.facts
        if id(site.scope) in {id(h) for h in facts.helpers}:
            return
        if qualified in GROUP_CALLS:
            if not _whole_statement(site):
                self._block(site.node, "MIG907", f"`{patterns.last_part(qualified)}` is used as "
                            "a value; migrate by hand")  # fmt: skip
                return
            rank = _keyword(site.node, "rank")
            if qualified == INIT and rank is not None and not self._plain_rank(site.scope, rank):
                self._block(site.node, "MIG907", "the process rank is computed by hand; "
                            "migrate by hand")  # fmt: skip
                return
            facts.removed_calls.append(site)
        elif self._sets_launch_environment(site.node) and _whole_statement(site):
            facts.removed_calls.append(site)
        elif qualified in DDP_CLASSES:
            self._wrap(site)
        elif qualified in SAMPLER_CLASSES:
            self._sampler(site)
        elif site.method == "set_epoch" and isinstance(site.receiver, cst.Attribute) and (
            site.receiver.attr.value == "sampler" and _whole_statement(site)
        ):
            facts.removed_calls.append(site)
        elif qualified in RANK_CALLS:
            small = site.small
            if not (isinstance(small, cst.Assign) and small.value is site.node and any(
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

    def _plain_rank(self, scope: Scope, rank: cst.BaseExpression) -> bool:
        if not isinstance(rank, cst.Name):
            return False
        if rank.value in scope.params:
            return True
        return self.facts.kind_of(scope, rank.value) == PROCESS_INDEX

    def _wrap(self, site: CallSite) -> None:
        small = site.small
        inner = _keyword(site.node, "module", 0)
        if inner is None or not isinstance(small, cst.Assign) or small.value is not site.node or (
            len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name)
        ):
            self._block(site.node, "MIG907", "DistributedDataParallel(...) is not assigned to a "
                        "name; migrate by hand")  # fmt: skip
            return
        target = small.targets[0].target.value
        root = inner
        while isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute) and (
            root.func.attr.value in ("to", "cuda")
        ):
            root = root.func.value
        inner_name = root.value if isinstance(root, cst.Name) else None
        if inner_name != target and len(site.scope.assigns(target)) != 1:
            self._block(site.node, "MIG907", f"`{target}` is rebound after wrapping the model "
                        "in DistributedDataParallel; migrate by hand")  # fmt: skip
            return
        options = [a.keyword.value for a in site.node.args
                   if a.keyword is not None and a.keyword.value not in DDP_OPTIONS_KEPT]
        self.facts.wraps.append(Wrap(site, target, inner, inner_name, options))

    def _sampler(self, site: CallSite) -> None:
        shuffle = _keyword(site.node, "shuffle", 3)
        sampler = Sampler(site=site, binding=None, shuffle=shuffle)
        loader = self._inline_loader_arg(site)
        if loader is not None:
            sampler.loader_args.append(loader)
            self.facts.samplers.append(sampler)
            return
        small = site.small
        scope = site.scope
        if isinstance(small, cst.Assign) and small.value is site.node and len(small.targets) == 1 \
                and isinstance(small.targets[0].target, cst.Name):  # fmt: skip
            name = small.targets[0].target.value
            bindings = scope.assigns(name)
            if len(bindings) == 1 and self._sampler_uses(sampler, scope, name):
                sampler.binding = bindings[0]
                self.facts.samplers.append(sampler)
                return
        self._block(site.node, "MIG907", "DistributedSampler is used beyond a DataLoader's "
                    "`sampler=` and `set_epoch`; migrate by hand")  # fmt: skip

    def _inline_loader_arg(self, site: CallSite):
        for other, _ in self.sites:
            if other.scope is site.scope and patterns.is_loader_call(other.node, self.imports):
                for arg in other.node.args:
                    if arg.value is site.node and arg.keyword is not None and (
                        arg.keyword.value == "sampler"
                    ):
                        return other.node, arg
        return None

    def _sampler_uses(self, sampler: Sampler, scope: Scope, name: str) -> bool:
        for use in scope.uses.get(name, []):
            call = use.call
            if use.kind == "arg" and call is not None and patterns.is_loader_call(
                call, self.imports
            ):
                arg = next((a for a in call.args if a.value is use.node), None)
                if arg is not None and arg.keyword is not None and arg.keyword.value == "sampler":
                    sampler.loader_args.append((call, arg))
                    continue
            if use.kind == "attr" and use.attr == "set_epoch" and call is not None:
                site = next((s for s, _ in self.sites if s.node is call), None)
                if site is not None and _whole_statement(site):
                    self.facts.removed_calls.append(site)
                    continue
            if self._in_loader_shuffle(use, name):
                continue
            return False
        return all(child.is_local(name) or not child.uses.get(name) for child in scope.children)

    def _in_loader_shuffle(self, use, name: str) -> bool:
        """`shuffle=(sampler is None)` in the loader the sampler feeds (rewritten with it)."""
        for site, _ in self.sites:
            if site.statement is not use.statement or not patterns.is_loader_call(
                site.node, self.imports
            ):
                continue
            shuffle = next((a for a in site.node.args
                            if a.keyword is not None and a.keyword.value == "shuffle"), None)
            feeds = _keyword(site.node, "sampler")
            if shuffle is not None and isinstance(feeds, cst.Name) and feeds.value == name:
                return _contains(shuffle.value, use.node)
        return False

    def _reduction(self, site: CallSite) -> bool:
        tensor = _keyword(site.node, "tensor", 0)
        op = _keyword(site.node, "op", 1)
        extra = [a for a in site.node.args if a.keyword is not None and a.keyword.value not in (
            "tensor", "op")]  # fmt: skip
        reduction = "sum" if op is None else REDUCE_OPS.get(
            (dotted_name(op) or "").rsplit("ReduceOp.", 1)[-1] if "ReduceOp." in (
                dotted_name(op) or "") else "")  # fmt: skip
        if not isinstance(tensor, cst.Name) or reduction is None or extra or not (
            _whole_statement(site)
        ):
            self.facts.collectives.append(site)
            return True
        self.facts.reductions.append(Reduction(site, tensor.value, reduction))
        return True

    def _block(self, node, code: str, message: str, level: str = "warning") -> None:
        self.facts.findings.append(Finding(code=code, message=message, node=node, level=level))
        self.facts.blocking = True


def _contains(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    found = []

    class _Find(cst.CSTVisitor):
        def on_visit(self, current: cst.CSTNode) -> bool:
            if current is node:
                found.append(current)
            return not found

    tree.visit(_Find())
    return bool(found)
