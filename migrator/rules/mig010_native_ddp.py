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
comment saying how to launch (ddp_spawn.py). Research scripts' ranks kept on `args`
(`args.gpu`, `args.rank`, `args.world_size`, `args.distributed`) lose their computations and
read the accelerator (ddp_launch_attributes.py); `if args.distributed:` choosing the sampler
becomes the loader's shuffle; `model_without_ddp = model.module` goes. Runs after MIG003/MIG004
so that `.to(rank)` they strip is gone.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.patterns import SELF, is_device_constructor
from migrator.analysis.distributed.facts import (
    LOCAL_PROCESS_INDEX,
    MAIN_PROCESS,
    NUM_PROCESSES,
    RANK_KINDS,
    DistributedFacts,
)  # fmt: skip
from migrator.analysis.distributed.reader import is_pure
from migrator.analysis.model.origins import class_methods, visible_scopes
from migrator.analysis.syntax.index import Scope, Statement
from migrator.analysis.syntax.views import call_args
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.checkpoint_keys import prefix_notes
from migrator.rules.ddp_collectives import guard_alone
from migrator.rules.ddp_launch_attributes import rewrite_launch_attributes
from migrator.rules.ddp_options import carry_ddp_options
from migrator.rules.ddp_samplers import SamplerMigration
from migrator.rules.ddp_sharded_loaders import sharded_loader
from migrator.rules.ddp_spawn import SpawnMigration
from migrator.rules.ddp_syntax import (
    NoImports,
    main_process_check,
    name_ids,
    parents_of,
)
from migrator.rules.never_wrapped import never_wrapped, trained_past_the_wrap
from migrator.rules.placement_calls import strip_placement

# Imports MIG010 may leave unused (DataParallel, also in torch.nn.parallel, is not ours).
DISTRIBUTED_MODULES = ("torch.distributed", "torch.multiprocessing", "torch.utils.data.distributed")
DISTRIBUTED_NAMES = {"DistributedDataParallel", "DistributedSampler"}
BRANCH_SAMPLERS = ("RandomSampler", "SequentialSampler")


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
        sharded = sharded_loader(context)
        if sharded is not None:
            context.block_file(sharded)
            return
        _Migration(context).run()
        wraps = [(wrap.target, wrap.site.node.lineno) for wrap in context.facts.distributed.wraps]
        prefix_notes(context, wraps, "DistributedDataParallel")
        never_wrapped(context)
        trained_past_the_wrap(context)


class _Migration(SpawnMigration, SamplerMigration):
    def __init__(self, context: RuleContext) -> None:
        self.context = context
        self.facts = context.facts
        self.dist: DistributedFacts = context.facts.distributed
        self.edits = context.edits
        self.index = context.facts.index
        self.parents = parents_of(context.tree)
        self.source = context.source
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
            self._epoch_note(sampler)
        for worker in dist.workers:
            self._drop_params(worker.scope, worker.removed_params)
        for spawn in dist.spawns:
            self._direct_call(spawn)
        self._ranks()
        rewrite_launch_attributes(self)
        self._collectives()
        self._unused_names()
        self._unused_imports()

    # -- statements that go ------------------------------------------------------------------
    def _remove(self, small: ast.AST | None, statement: Statement) -> None:
        self.edits.remove(small)
        # `if torch.cuda.is_available(): torch.cuda.set_device(rank)` goes with its body; an
        # `if`/`else` whose branches both empty (`model = DDP(model, ids)` / `DDP(model)`) too.
        for enclosing in reversed(statement.chain()[:-1]):
            node = enclosing.node
            if not isinstance(node, ast.If) or self._has_elif(node):
                break
            self.edits.drop_if_emptied.add(id(node))

    def _has_elif(self, node: ast.If) -> bool:
        """An `elif` that has branches of its own after it (`if a: ... elif b: ...` alone
        empties as one statement when both bodies do: the renderer checks both)."""
        first = node.orelse[0] if len(node.orelse) == 1 else None
        return (
            isinstance(first, ast.If)
            and self.source.text.startswith("elif", self.source.start(first))
            and bool(first.orelse)
        )

    # -- the DDP wrapper ---------------------------------------------------------------------
    def _unwrap_models(self) -> None:
        for _scope, _name, bindings in self.dist.aliases:  # `model_without_ddp = model.module`
            for binding in bindings:
                self._remove(binding.small, binding.statement)
        wrapped = set()
        left = carry_ddp_options(self.context, self.dist.wraps)
        for wrap in self.dist.wraps:
            site = wrap.site
            if wrap in left:
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
                        self.edits.replace(use.node, lambda _t, _r, n=wrap.inner_name: n)
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
                        and isinstance(attribute, ast.Attribute)
                        and not self._assigned_or_deleted(attribute)
                        and id(use.statement.node) not in self.edits.removals
                        and id(self.parents.get(id(attribute))) not in self.edits.removals
                    ):
                        self.edits.replace(attribute, self._unwrap_model(attribute))
                        self.context.need_accelerator_at(use.statement)

    def _assigned_or_deleted(self, node: ast.AST) -> bool:
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Assign):
            return any(target is node for target in parent.targets)
        return isinstance(parent, ast.Delete)

    def _unwrap_expression(self, wrap) -> None:
        site = wrap.site
        if isinstance(wrap.inner, ast.Call):
            devices = self.facts.device_names(site.scope)
            strip_placement(wrap.inner, devices, self.index.imports, self.edits)
        args = call_args(site.node)
        drops = [site.node.func, *(a.node for a in args if a.value is not wrap.inner)]
        inner = wrap.inner
        self.edits.replace(site.node, lambda _t, r: r.text_of(inner, parens=False), drops=drops)

    def _unwrap_model(self, attribute: ast.Attribute):
        unwrap = self.context.accelerator_expr("unwrap_model")
        return lambda _text, r: f"{unwrap}({r.text_of(attribute.value)})"

    # -- ranks -------------------------------------------------------------------------------
    def _ranks(self) -> None:
        facts, dist = self.facts, self.dist
        for rank_name in dist.rank_names:
            by_value = rank_name.binding is None  # a removed parameter: every use is replaced
            instance = rank_name.name.startswith(SELF + ".")  # a Trainer's `self.gpu_id`
            scopes = class_methods(rank_name.scope) if instance else visible_scopes(
                rank_name.scope, rank_name.name)  # fmt: skip
            for scope in scopes:
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
        for node, statement in dist.process_counts:  # `len(args.gpus.split(","))`
            self._rank_use(node, statement, NUM_PROCESSES, by_value=True)
        for use in dist.rank_attributes:  # `args.local_rank`
            attribute = self.parents.get(id(use.node))
            assign = self.parents.get(id(attribute))
            if not (isinstance(assign, ast.Assign) and any(t is attribute for t in assign.targets)):
                self._rank_use(attribute, use.statement, LOCAL_PROCESS_INDEX, by_value=True)
                continue
            if len(assign.targets) == 1 and is_pure(assign.value, self.index.imports):
                self._remove(assign, use.statement)  # `args.local_rank = int(os.environ[...])`
        for rank_name in dist.rank_names:
            binding = rank_name.binding
            if (
                binding is not None
                and not isinstance(binding.value, ast.Name)  # `self.gpu_id = gpu_id`
                and self._still_used(rank_name.scope, rank_name.name)
            ):
                self.edits.replace_with(
                    binding.value, self.context.accelerator_expr(rank_name.kind)
                )
                self.context.need_accelerator_at(binding.statement)

    def _rank_use(self, node: ast.AST, statement: Statement, kind: str, by_value: bool):
        if id(node) in self.edits.dropped_names or id(node) in self.device_values:
            return
        if self.edits.has_replacement(node):
            return
        check = main_process_check(node, self.parents, self.source) if (
            kind in MAIN_PROCESS) else None  # fmt: skip
        device = self._device_context(node) if kind in RANK_KINDS else None
        if check is not None:
            comparison, negated = check
            flag = self.context.accelerator_expr(MAIN_PROCESS[kind])
            if negated:
                flag = f"not {flag}"
            self.edits.rewrite(comparison, lambda _t, _r, f=flag: f, drops=[comparison])
        elif device is not None:
            self.edits.replace_with(device, self.context.accelerator_expr("device"))
        elif by_value:
            self.edits.replace_with(node, self.context.accelerator_expr(kind))
        else:
            return
        self.context.need_accelerator_at(statement)

    def _device_context(self, node: ast.AST) -> ast.AST | None:
        """The expression to replace by `accelerator.device` when a rank names a device."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.FormattedValue):
            text = self.parents.get(id(parent))
            if isinstance(text, ast.JoinedStr) and is_device_constructor(text, NoImports()):
                return text
            return None
        if isinstance(parent, ast.keyword):
            keyword, argument = parent.arg, parent
            call = self.parents.get(id(parent))
        elif isinstance(parent, ast.Starred):
            keyword, argument = None, parent
            call = self.parents.get(id(parent))
        else:
            keyword, argument, call = None, node, parent
        if not isinstance(call, ast.Call) or (
            argument is node and not any(a is node for a in call.args)
        ):
            return None
        if self.index.imports.qualify(call.func) == "torch.device":
            return call
        if keyword in ("device", "map_location"):
            return node
        args = call_args(call)
        if (
            isinstance(call.func, ast.Attribute)
            and call.func.attr in ("to", "cuda")
            and (keyword is None and args and args[0].node is argument)
        ):
            return node
        return None

    # -- barriers and collectives ------------------------------------------------------------
    def _collectives(self) -> None:
        for site in self.dist.barriers:
            call = self.context.accelerator_expr("wait_for_everyone")
            self.edits.replace_with(site.node, f"{call}()")
            self.context.need_accelerator_at(site.statement)
        for reduction in self.dist.reductions:
            site = reduction.site
            code = (f"{reduction.tensor} = {self.context.accelerator}.reduce({reduction.tensor}, "
                    f'reduction="{reduction.reduction}")')  # fmt: skip
            drops = [site.node.func, *(a.node for a in call_args(site.node)[1:])]
            self.edits.replace(site.small, lambda _t, _r, c=code: c, drops=drops)
            self.context.need_accelerator_at(site.statement)
        for site in self.dist.collectives:
            name = self.source.text_of(site.node.func)
            if guard_alone(self.context, site):
                continue
            self._finding(
                site.node,
                f"`{name}(...)` left as it is: the Accelerator's process "
                "group still runs it, but check it against prepared objects (use "
                "accelerator.reduce / gather_for_metrics where it is a metric); on one "
                "process there is no process group and it raises",
            )

    # -- clean-up ----------------------------------------------------------------------------
    def _still_used(self, scope: Scope, name: str) -> bool:
        gone = self.edits.dropped_names | self.device_values
        scopes = class_methods(scope) if name.startswith(SELF + ".") else visible_scopes(
            scope, name)  # fmt: skip
        return any(id(use.node) not in gone for current in scopes
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
                        or not (isinstance(small, ast.Assign) and len(small.targets) == 1)
                        or id(small) in self.edits.removals
                        or id(small) in device_smalls
                    ):
                        continue
                    scopes = class_methods(scope) if name.startswith(SELF + ".") else (
                        visible_scopes(scope, name))  # fmt: skip
                    uses = [u for s in scopes for u in s.uses.get(name, [])]
                    ours = [u for u in uses if id(u.node) not in self.dropped_before]
                    if not ours or self._still_used(scope, name):
                        continue
                    # `num_tasks = dist.get_world_size()` read only by a removed sampler
                    if is_pure(small.value, self.index.imports) or any(
                        r.binding is binding for r in self.dist.rank_names
                    ):  # fmt: skip
                        self._remove(small, binding.statement)
                        changed = True

    def _unused_imports(self) -> None:
        """Imports of the distributed vocabulary go when nothing uses them any more."""
        dropped_os = any(
            id(u.node) in self.edits.dropped_names
            for scope in self.index.scopes
            for u in scope.uses.get("os", [])
        )
        # the other branch of `if args.distributed:` (RandomSampler / SequentialSampler) goes
        # with the DistributedSampler; an import that was unused already is not ours
        used = {
            name
            for name in BRANCH_SAMPLERS
            if any(scope.uses.get(name) for scope in self.index.scopes)
        }
        self.context.retire_imports(
            lambda full: (
                full.rsplit(".", 1)[-1] in DISTRIBUTED_NAMES
                or full.rsplit(".", 1)[-1] in used
                or full.startswith(DISTRIBUTED_MODULES)
                or (full == "os" and dropped_os)
            )
        )

    def _finding(self, node: ast.AST, message: str) -> None:
        self.context.findings.append(Finding(code="MIG909", message=message, node=node))
