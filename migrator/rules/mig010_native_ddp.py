"""MIG010 native DDP: hand-written torch.distributed comes out, the Accelerator takes over.

Process-group set-up/tear-down (and `setup()`/`cleanup()` helpers that only do that) and
`torch.cuda.set_device` go; `DistributedDataParallel(model, ...)` is unwrapped (the analysis
already treats `ddp_model` as `model`, so prepare gets the plain model); `DistributedSampler`
goes and its loader gets back `shuffle=`; `set_epoch` goes; `.module` becomes
`accelerator.unwrap_model(...)`; ranks become `accelerator.process_index` /
`local_process_index` / `num_processes`, `rank == 0` becomes `accelerator.is_main_process`, a
rank used as a device becomes `accelerator.device`; `dist.barrier()` becomes
`accelerator.wait_for_everyone()`; a metric `dist.all_reduce(t)` becomes
`t = accelerator.reduce(t, reduction="sum")`; `mp.spawn(fn, ...)` becomes `fn(...)` with a
comment saying how to launch. Runs after MIG003/MIG004 so that `.to(rank)` they strip is gone.
"""

from __future__ import annotations

import libcst as cst

from migrator.analysis.distributed import is_pure
from migrator.analysis.distributed_facts import (
    LOCAL_PROCESS_INDEX,
    MAIN_PROCESS,
    RANK_KINDS,
    DistributedFacts,
    Sampler,
    Spawn,
)  # fmt: skip
from migrator.analysis.facts import visible_scopes
from migrator.analysis.index import Scope, Statement
from migrator.analysis.patterns import is_device_constructor
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.ddp_syntax import (
    NoImports,
    main_process_check,
    name_ids,
    parents_of,
    without_args,
    without_params,
)
from migrator.rules.placement_calls import strip_placement

# Imports MIG010 may leave unused (DataParallel, also in torch.nn.parallel, is not ours).
DISTRIBUTED_MODULES = ("torch.distributed", "torch.multiprocessing", "torch.utils.data.distributed")
DISTRIBUTED_NAMES = {"DistributedDataParallel", "DistributedSampler"}
_CODE = cst.Module(body=[])


class NativeDDP(Rule):
    code = "MIG010"
    name = "native-ddp"
    summary = "hand-written DDP (process group, DDP wrapper, sampler, ranks, mp.spawn) removed"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        if not context.facts.distributed.present:
            return
        if "MIG006" not in context.selected:  # without prepare, unwrapping DDP loses the sync
            node = context.facts.training_loops[0].node if context.facts.training_loops else None
            context.findings.append(
                Finding(
                    code="MIG907",
                    node=node,
                    message="native DDP left as it is: MIG010 needs MIG006 (prepare) selected",
                )
            )
            return
        _Migration(context).run()


class _Migration:
    def __init__(self, context: RuleContext) -> None:
        self.context = context
        self.facts = context.facts
        self.dist: DistributedFacts = context.facts.distributed
        self.edits = context.edits
        self.index = context.facts.index
        self.parents = parents_of(context.module)
        self.dropped_before = set(self.edits.dropped_names)
        # Names inside device values MIG002 rewrites whole (`torch.device("cuda", local_rank)`).
        self.device_values: set[int] = set()
        for binding in self.facts.device_bindings if "MIG002" in context.selected else []:
            value = binding.element if binding.unpacked else binding.value
            if value is not None:
                self.device_values |= name_ids(value)

    def run(self) -> None:
        dist = self.dist
        for helper in dist.helpers:
            self.edits.remove(helper.node)
        for site in dist.removed_calls:
            self._remove(site.small, site.statement)
        for small, statement in dist.removed_smalls:
            self._remove(small, statement)
        self._unwrap_models()
        for sampler in dist.samplers:
            self._drop_sampler(sampler)
        for worker in dist.workers:
            self._drop_params(worker.scope, worker.removed_params)
        for spawn in dist.spawns:
            self._direct_call(spawn)
        self._ranks()
        self._collectives()
        self._unused_names()
        self._unused_imports()

    # -- statements that go ------------------------------------------------------------------
    def _remove(self, small: cst.CSTNode | None, statement: Statement) -> None:
        self.edits.remove(small)
        # `if torch.cuda.is_available(): torch.cuda.set_device(rank)` goes with its body; an
        # `if`/`else` whose branches both empty (`model = DDP(model, ids)` / `DDP(model)`) too.
        for enclosing in reversed(statement.chain()[:-1]):
            if not isinstance(enclosing.node, cst.If) or isinstance(enclosing.node.orelse, cst.If):
                break
            self.edits.drop_if_emptied.add(id(enclosing.node))

    # -- the DDP wrapper ---------------------------------------------------------------------
    def _unwrap_models(self) -> None:
        wrapped = set()
        for wrap in self.dist.wraps:
            site = wrap.site
            if wrap.dropped_options:
                self._finding(site.node, f"DistributedDataParallel option(s) "
                              f"{', '.join(wrap.dropped_options)} dropped with the wrapper: set "
                              "them on the Accelerator by hand")  # fmt: skip
            origin = self.facts.origin(site.scope, wrap.inner_name or wrap.target)
            if origin is not None:
                wrapped.add((id(origin.scope), origin.name))
            if wrap.inner_name is None:  # `model = DDP(Net().to(device))` -> `model = Net()`
                self._unwrap_expression(wrap)
                continue
            self._remove(site.small, site.statement)
            if wrap.target != wrap.inner_name:
                for scope in visible_scopes(site.scope, wrap.target):
                    for use in scope.uses.get(wrap.target, []):
                        self.edits.replace(use.node, lambda _u, n=wrap.inner_name: cst.Name(n))
        for scope in self.index.scopes:  # `ddp_model.module` -> accelerator.unwrap_model(model)
            for name, uses in scope.uses.items():
                origin = self.facts.origin(scope, name)
                if origin is None or (id(origin.scope), origin.name) not in wrapped:
                    continue
                for use in uses:
                    attribute = self.parents.get(id(use.node))
                    if (
                        use.kind == "attr"
                        and use.attr == "module"
                        and isinstance(attribute, cst.Attribute)
                        and not isinstance(
                            self.parents.get(id(attribute)), (cst.AssignTarget, cst.Del)
                        )
                    ):
                        self.edits.replace(attribute, self._unwrap_model)
                        self.context.need_accelerator_at(use.statement)

    def _unwrap_expression(self, wrap) -> None:
        site = wrap.site
        position = next(i for i, a in enumerate(site.node.args) if a.value is wrap.inner)
        if isinstance(wrap.inner, cst.Call):
            devices = self.facts.device_names(site.scope)
            strip_placement(wrap.inner, devices, self.index.imports, self.edits)
        drops = [site.node.func, *(a.value for a in site.node.args if a.value is not wrap.inner)]

        def inner(updated: cst.CSTNode) -> cst.CSTNode:
            if not isinstance(updated, cst.Call):
                return updated
            return updated.args[position].value.with_changes(lpar=[], rpar=[])

        self.edits.replace(site.node, inner, drops=drops)

    def _unwrap_model(self, updated: cst.CSTNode) -> cst.CSTNode:
        if not isinstance(updated, cst.Attribute):
            return updated
        unwrap = self.context.accelerator_expr("unwrap_model")
        return cst.Call(func=unwrap, args=[cst.Arg(value=updated.value)])

    # -- the sampler -------------------------------------------------------------------------
    def _drop_sampler(self, sampler: Sampler) -> None:
        if sampler.binding is not None:
            self._remove(sampler.binding.small, sampler.binding.statement)
        shuffle = _CODE.code_for_node(sampler.shuffle) if sampler.shuffle is not None else "True"
        for loader, arg in sampler.loader_args:
            existing = next(
                (a for a in loader.args if a.keyword is not None and a.keyword.value == "shuffle"),
                None,
            )
            value = cst.parse_expression(shuffle)
            if existing is None:
                self.edits.replace(arg, lambda u, v=value: u.with_changes(
                    keyword=cst.Name("shuffle"), value=v), drops=[arg.value])  # fmt: skip
                continue
            self.edits.replace(existing.value, lambda _u, v=value: v, drops=[existing.value])
            position = list(loader.args).index(arg)
            self.edits.replace(loader, lambda u, p=position: without_args(u, {p}),
                               drops=[arg.value])  # fmt: skip

    # -- mp.spawn ----------------------------------------------------------------------------
    def _drop_params(self, target: Scope, names: list[str]) -> None:
        params = [p for p in target.params if not p.startswith("*")]
        removed = {params.index(p) for p in names}
        self.edits.replace(target.node.params, lambda u: without_params(u, removed))
        for other in self.index.calls():  # direct calls elsewhere (`train(0, 1)` for one process)
            if isinstance(other.node.func, cst.Name) and other.node.func.value == target.name:
                positions = {
                    i for i, a in enumerate(other.node.args) if a.keyword is None and i in removed
                } | {
                    i
                    for i, a in enumerate(other.node.args)
                    if a.keyword is not None and a.keyword.value in names
                }
                self.edits.replace(
                    other.node,
                    lambda u, p=positions: without_args(u, p),
                    drops=[other.node.args[i].value for i in positions],
                )

    def _direct_call(self, spawn: Spawn) -> None:
        target, site = spawn.target, spawn.site
        kept = {id(v) for v in spawn.arguments}
        tuple_position, kept_positions, drops = None, [], [site.node.func]
        for position, arg in enumerate(site.node.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "fn" or (keyword is None and position == 0):
                continue
            if keyword == "args" or (keyword is None and position == 1):
                tuple_position = position
                for i, element in enumerate(arg.value.elements):
                    if id(element.value) in kept:
                        kept_positions.append(i)
                    else:
                        drops.append(element.value)
            else:
                drops.append(arg.value)

        def direct(updated: cst.CSTNode) -> cst.CSTNode:
            values = []
            if tuple_position is not None:
                elements = updated.args[tuple_position].value.elements
                values = [elements[i].value for i in kept_positions]
            args = [cst.Arg(value=v, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    for v in values]  # fmt: skip
            if args:
                args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return cst.Call(func=cst.Name(target.name), args=args)

        self.edits.replace(site.node, direct, drops=drops)
        line = site.statement.node
        if isinstance(line, cst.SimpleStatementLine) and line.trailing_whitespace.comment is None:
            comment = f"# launch with: migrate launch --nproc {self._nprocs(spawn)} <script>"
            self.edits.replace(
                line,
                lambda u: u.with_changes(
                    trailing_whitespace=u.trailing_whitespace.with_changes(
                        whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(comment)
                    )
                ),
            )

    def _nprocs(self, spawn: Spawn) -> str:
        value = spawn.nprocs
        if isinstance(value, cst.Name):
            bindings = spawn.site.scope.assigns(value.value)
            value = bindings[0].value if len(bindings) == 1 else None
        return value.value if isinstance(value, cst.Integer) else "N"

    # -- ranks -------------------------------------------------------------------------------
    def _ranks(self) -> None:
        facts, dist = self.facts, self.dist
        for rank_name in dist.rank_names:
            by_value = rank_name.binding is None  # a removed parameter: every use is replaced
            for scope in visible_scopes(rank_name.scope, rank_name.name):
                for use in scope.uses.get(rank_name.name, []):
                    self._rank_use(use.node, use.statement, rank_name.kind, by_value)
        for scope in self.index.scopes:  # helpers handed a rank by their callers
            for param in scope.params if scope.kind == "function" else []:
                kind = facts.rank_kind(scope, param)
                if kind is not None and dist.kind_of(scope, param) is None:
                    for use in scope.uses.get(param, []):
                        self._rank_use(use.node, use.statement, kind, by_value=False)
        for site, kind in dist.rank_calls:
            self._rank_use(site.node, site.statement, kind, by_value=True)
        for use in dist.rank_attributes:  # `args.local_rank`
            attribute = self.parents.get(id(use.node))
            target = self.parents.get(id(attribute))
            if not isinstance(target, cst.AssignTarget):
                self._rank_use(attribute, use.statement, LOCAL_PROCESS_INDEX, by_value=True)
                continue
            assign = self.parents.get(id(target))  # `args.local_rank = int(os.environ[...])`
            if (
                isinstance(assign, cst.Assign)
                and len(assign.targets) == 1
                and is_pure(assign.value, self.index.imports)
            ):
                self._remove(assign, use.statement)
        for rank_name in dist.rank_names:
            binding = rank_name.binding
            if binding is not None and self._still_used(rank_name.scope, rank_name.name):
                value = self.context.accelerator_expr(rank_name.kind)
                self.edits.replace(binding.value, lambda _u, v=value: v, drops=[binding.value])
                self.context.need_accelerator_at(binding.statement)

    def _rank_use(self, node: cst.CSTNode, statement: Statement, kind: str, by_value: bool):
        if id(node) in self.edits.dropped_names or id(node) in self.device_values:
            return
        if self.edits.has_replacement(node):
            return
        check = main_process_check(node, self.parents) if kind in MAIN_PROCESS else None
        device = self._device_context(node) if kind in RANK_KINDS else None
        if check is not None:
            comparison, negated = check
            flag: cst.BaseExpression = self.context.accelerator_expr(MAIN_PROCESS[kind])
            if negated:
                flag = cst.UnaryOperation(operator=cst.Not(), expression=flag)
            self.edits.replace(comparison, lambda u, f=flag: f.with_changes(
                lpar=u.lpar, rpar=u.rpar), drops=[comparison])  # fmt: skip
        elif device is not None:
            value = self.context.accelerator_expr("device")
            self.edits.replace(device, lambda _u, v=value: v, drops=[device])
        elif by_value:
            value = self.context.accelerator_expr(kind)
            self.edits.replace(node, lambda _u, v=value: v, drops=[node])
        else:
            return
        self.context.need_accelerator_at(statement)

    def _device_context(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The expression to replace by `accelerator.device` when a rank names a device."""
        parent = self.parents.get(id(node))
        if isinstance(parent, cst.FormattedStringExpression):
            text = self.parents.get(id(parent))
            if isinstance(text, cst.FormattedString) and is_device_constructor(text, NoImports()):
                return text
            return None
        if not isinstance(parent, cst.Arg):
            return None
        call = self.parents.get(id(parent))
        if not isinstance(call, cst.Call):
            return None
        keyword = parent.keyword.value if parent.keyword is not None else None
        if self.index.imports.qualify(call.func) == "torch.device":
            return call
        if keyword in ("device", "map_location"):
            return node
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value in ("to", "cuda")
            and (keyword is None and call.args and call.args[0] is parent)
        ):
            return node
        return None

    # -- barriers and collectives ------------------------------------------------------------
    def _collectives(self) -> None:
        for site in self.dist.barriers:
            call = self.context.accelerator_expr("wait_for_everyone")
            self.edits.replace(site.node, lambda _u, c=call: cst.Call(func=c), drops=[site.node])
            self.context.need_accelerator_at(site.statement)
        for reduction in self.dist.reductions:
            site = reduction.site
            code = (f"{reduction.tensor} = {self.context.accelerator}.reduce({reduction.tensor}, "
                    f'reduction="{reduction.reduction}")')  # fmt: skip
            assign = cst.parse_statement(code + "\n").body[0]
            self.edits.replace(site.small, lambda u, a=assign: a.with_changes(
                semicolon=u.semicolon), drops=[site.node.func, *(a.value for a in
                                                                 site.node.args[1:])])  # fmt: skip
            self.context.need_accelerator_at(site.statement)
        for site in self.dist.collectives:
            name = _CODE.code_for_node(site.node.func)
            self._finding(
                site.node,
                f"`{name}(...)` left as it is: the Accelerator's process "
                "group still runs it, but check it against prepared objects (use "
                "accelerator.reduce / gather_for_metrics where it is a metric)",
            )

    # -- clean-up ----------------------------------------------------------------------------
    def _still_used(self, scope: Scope, name: str) -> bool:
        gone = self.edits.dropped_names | self.device_values
        return any(id(use.node) not in gone for current in visible_scopes(scope, name)
                   for use in current.uses.get(name, []))  # fmt: skip

    def _unused_names(self) -> None:
        """`world_size = 2`, `backend = "gloo"`, `rank = int(os.environ["RANK"])`: gone when
        the statements that read them went."""
        device_smalls = {id(b.small) for b in self.facts.device_bindings}
        changed = True
        while changed:
            changed = False
            for scope in self.index.scopes:
                for name, bindings in scope.bindings.items():
                    binding = bindings[0]
                    small = binding.small
                    if (
                        len(bindings) != 1
                        or binding.kind != "assign"
                        or binding.unpacked
                        or not (isinstance(small, cst.Assign) and len(small.targets) == 1)
                        or id(small) in self.edits.removals
                        or id(small) in device_smalls
                    ):
                        continue
                    uses = [u for s in visible_scopes(scope, name) for u in s.uses.get(name, [])]
                    ours = [u for u in uses if id(u.node) not in self.dropped_before]
                    if not ours or self._still_used(scope, name):
                        continue
                    if is_pure(small.value, self.index.imports):
                        self._remove(small, binding.statement)
                        changed = True

    def _unused_imports(self) -> None:
        """Imports of the distributed vocabulary go when nothing uses them any more."""
        dropped_os = any(
            id(u.node) in self.edits.dropped_names
            for scope in self.index.scopes
            for u in scope.uses.get("os", [])
        )
        self.context.retire_imports(
            lambda full: (
                full.rsplit(".", 1)[-1] in DISTRIBUTED_NAMES
                or full.startswith(DISTRIBUTED_MODULES)
                or (full == "os" and dropped_os)
            )
        )

    def _finding(self, node: cst.CSTNode, message: str) -> None:
        self.context.findings.append(Finding(code="MIG909", message=message, node=node))
