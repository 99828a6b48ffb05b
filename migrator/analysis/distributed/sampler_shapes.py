"""The shapes around a DistributedSampler that MIG010 can fold into the loader's own arguments,
read apart from distributed_objects.py for size: the sampler's options (only the dataset, its
`shuffle=`, and `num_replicas=`/`rank=` that name the world size and this process's rank), a
`print(...)` of the sampler (research scripts log it), and a `BatchSampler(sampler, batch_size,
drop_last)` that only feeds a DataLoader's `batch_sampler=` (DETR): the loader gets
`batch_size=`, `shuffle=` and `drop_last=` instead."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.facts import (
    INIT,
    NUM_PROCESSES,
    PROCESS_INDEX,
    RANK_CALLS,
    DistributedFacts,
    contains,
    whole_statement,
)
from migrator.analysis.distributed.ranks import env_kind
from migrator.analysis.model.origins import argument_for
from migrator.analysis.syntax.index import Binding, CallSite, Scope
from migrator.analysis.syntax.views import Arg, call_args, keyword_value, name_value

BATCH_SAMPLERS = {"torch.utils.data.BatchSampler", "torch.utils.data.sampler.BatchSampler"}
# what `num_replicas=` / `rank=` must say for the Accelerator's sharding to be the same
REPLICA_OPTIONS = {"num_replicas": (NUM_PROCESSES, "get_world_size"),
                   "rank": (PROCESS_INDEX, "get_rank")}  # fmt: skip
# the loader options a `batch_sampler=` excludes, and that the rewrite sets
BATCH_OPTIONS = ("batch_size", "shuffle", "sampler", "drop_last")
_POSITIONS = ("dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last")


@dataclass(eq=False)
class BatchLoader:
    """`batch = BatchSampler(sampler, batch_size, drop_last=...)` feeding
    `DataLoader(ds, batch_sampler=batch)`."""

    binding: Binding
    loader: ast.Call
    arg: Arg  # the loader's `batch_sampler=` argument
    batch_size: ast.expr
    drop_last: ast.expr


def option_problem(call: ast.Call, scope: Scope, facts: DistributedFacts, imports,
                   sites=(), functions=None) -> str | None:  # fmt: skip
    """None when the DistributedSampler's options are the dataset, `shuffle=`, `seed=`,
    `drop_last=False`, and `num_replicas=`/`rank=` naming the world size and the rank (also
    as the process group was told them: `sites` are the file's calls with their qualified
    names, `functions` its functions by name); else what is not (`drop_last=True` trims
    where the Accelerator pads)."""
    group = GroupArguments(sites, functions or {}, imports)
    for position, arg in enumerate(_spelled_out(call, scope)):
        if arg.star:
            return f"passes `{arg.star}` arguments at line {call.lineno}, not read"
        keyword = arg.keyword or _POSITIONS[min(position, 5)]
        # the rewrite never kept DistributedSampler's own order, so its seed means nothing more
        if keyword in ("dataset", "shuffle", "seed") or (
            keyword == "drop_last" and constant(arg.value) in (False, True)
        ):  # fmt: skip
            continue  # `drop_last=True`: as its loaders drop theirs (drop_last_problem)
        expected = REPLICA_OPTIONS.get(keyword)
        if keyword == "drop_last":
            return (f"passes `drop_last=` at line {arg.value.lineno}: it trims the samples "
                    "that do not split evenly, where the Accelerator's loader pads them")  # fmt: skip
        if expected is None or not (
            _names(arg.value, scope, facts, imports, *expected)
            or group.told(arg.value, scope, GROUP_KEYWORDS[keyword])
            or group.returned(arg.value, scope, facts, expected)
            or group.branched(arg.value, scope, facts, expected)
            or group.passed(arg.value, scope, facts, expected)
        ):
            what = "this process's rank" if keyword == "rank" else "the world size"
            if expected is None:
                what = "an option the loader Accelerate prepares has no counterpart for"
            return f"passes `{keyword}=` at line {arg.value.lineno}, not {what}"
    return None


GROUP_KEYWORDS = {"num_replicas": "world_size", "rank": "rank"}


def _same_chain(expr: ast.expr, told: ast.expr, scope: Scope) -> bool:
    """`args.world_size` both times, in one function that binds `args` at most once and
    never assigns the attribute: one value."""
    if not isinstance(expr, ast.Attribute) or ast.dump(expr) != ast.dump(told):
        return False
    root = expr
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or len(scope.bindings.get(root.id, [])) > 1:
        return False  # a parameter or a name, bound once
    return not any(
        isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        and any(
            ast.unparse(t) == ast.unparse(expr)  # (the target's context is Store)
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
        for node in ast.walk(scope.node)
    )


def drop_last_problem(sampler) -> str | None:
    """None unless the DistributedSampler passes `drop_last=True` and a loader it feeds keeps
    its last batch. Dropped on both, the steps agree: each process's ⌊⌊n/N⌋/b⌋ batches are
    the ⌊⌊n/b⌋/N⌋ the prepared loader deals each one (both ⌊n/(N·b)⌋); a loader keeping its
    last batch would get ⌈n/(N·b)⌉ from the Accelerator, padded, where the sampler trimmed."""
    call = sampler.site.node
    trims = keyword_value(call, "drop_last", _POSITIONS.index("drop_last"))
    if constant(trims) is not True:
        return None
    drops = [keyword_value(loader, "drop_last", 8) for loader, _ in sampler.loader_args]
    drops += [batches.drop_last for batches in sampler.batch_loaders]
    if drops and all(constant(d) is True for d in drops):
        return None
    return (f"passes `drop_last=` at line {trims.lineno} where its loader keeps its last "
            "batch: it trims the samples that do not split evenly, where the Accelerator's "
            "loader pads them")  # fmt: skip


def _spelled_out(call: ast.Call, scope: Scope) -> list[Arg]:
    """The call's arguments, a `**kwargs` of a dict literal the scope binds once
    (`sampler_kwargs = {"num_replicas": n, "rank": r}`) read as its keywords."""
    found = []
    for arg in call_args(call):
        bindings = scope.assigns(name_value(arg.value) or "") if arg.star == "**" else []
        value = bindings[0].value if len(bindings) == 1 and not bindings[0].unpacked else None
        if isinstance(value, ast.Dict) and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys
        ):
            found.extend(Arg(k.value, v, "", v) for k, v in zip(value.keys, value.values))
            continue
        found.append(arg)
    return found


class GroupArguments:
    """What the script told `init_process_group` (`world_size=`, `rank=`): a sampler given the
    same is given the world size and the rank the Accelerator's process group has."""

    def __init__(self, sites, functions: dict, imports) -> None:
        self.inits = [site for site, qualified in sites if qualified == INIT]
        self.sites = sites
        self.functions = functions
        self.imports = imports

    def told(self, expr: ast.expr, scope: Scope, keyword: str, depth: int = 0) -> bool:
        """`expr` is what an init_process_group call was told as `keyword`: the same call
        (`torch.cuda.device_count()`), the same name in the same function, a name this
        function hands to a parameter of a function of the file that tells it, or a
        parameter every caller of this function passes such a value
        (`get_dataloader(rank, nprocs)` called from the worker that also calls
        `setup(rank, nprocs)`)."""
        for init in self.inits:
            told = keyword_value(init.node, keyword, 2 if keyword == "world_size" else 3)
            if told is None:
                continue
            if isinstance(expr, ast.Call) and not expr.args and ast.dump(expr) == ast.dump(told):
                return True
            if init.scope is scope and _same_chain(expr, told, scope):
                return True  # `num_replicas=args.world_size` beside `world_size=args.world_size`
            name = name_value(expr) if isinstance(expr, ast.Name) else None
            if name is None or not isinstance(told, ast.Name):
                continue
            if init.scope is scope and told.id == name:
                return True
            if self._handed(scope, name, init.scope, told.id):
                return True
        name = name_value(expr) if isinstance(expr, ast.Name) else None
        if name is None or name not in scope.params or depth > 2 or scope.assigns(name):
            return False
        return self._passed_by_every_caller(scope, name, keyword, depth)

    def _passed_by_every_caller(self, scope: Scope, name: str, keyword: str, depth: int):
        callers = self._callers(scope)
        return bool(callers) and all(
            (argument := argument_for(site.node, scope, name)) is not None
            and self.told(argument, site.scope, keyword, depth + 1)
            for site in callers
        )

    def _callers(self, scope: Scope) -> list:
        """The calls of the file that run `scope`, a function of it."""
        return [site for site, _qualified in self.sites
                if self.functions.get(name_value(site.node.func)) is scope]  # fmt: skip

    def passed(self, expr: ast.expr, scope: Scope, facts: DistributedFacts, expected,
               depth: int = 0) -> bool:  # fmt: skip
        """A parameter every caller of its function (of the file) passes the world size (the
        rank) as read where the call is: `get_loaders(..., world_size=world_size)` from a
        caller with `world_size = int(os.environ["WORLD_SIZE"])` (h10 review)."""
        name = name_value(expr) if isinstance(expr, ast.Name) else None
        if name is None or name not in scope.params or scope.assigns(name) or depth > 2:
            return False
        callers = self._callers(scope)
        return bool(callers) and all(
            (argument := argument_for(site.node, scope, name)) is not None
            and (
                _names(argument, site.scope, facts, self.imports, *expected)
                or env_kind(argument, self.imports) == expected[0]
                or self.passed(argument, site.scope, facts, expected, depth + 1)
            )
            for site in callers
        )

    def returned(self, expr: ast.expr, scope: Scope, facts: DistributedFacts, expected) -> bool:
        """`rank, world, local_rank = setup_dist()`: a name unpacked from a call of a function
        of the file whose every return holds the rank / world size at that place."""
        name = name_value(expr) if isinstance(expr, ast.Name) else None
        bindings = scope.assigns(name) if name is not None else []
        if len(bindings) != 1 or not bindings[0].unpacked:
            return False
        small = bindings[0].small
        call = bindings[0].value
        if not isinstance(small, ast.Assign) or not isinstance(call, ast.Call):
            return False
        target = small.targets[0]
        callee = self.functions.get(name_value(call.func) or "")
        if callee is None or not isinstance(target, ast.Tuple):
            return False
        position = next((i for i, t in enumerate(target.elts) if name_value(t) == name), None)
        returns = [n for n in ast.walk(callee.node) if isinstance(n, ast.Return)]
        return bool(returns) and position is not None and all(
            isinstance(r.value, ast.Tuple) and len(r.value.elts) == len(target.elts)
            and _names(r.value.elts[position], callee, facts, self.imports, *expected)
            for r in returns
        )  # fmt: skip

    def branched(self, expr: ast.expr, scope: Scope, facts: DistributedFacts, expected) -> bool:
        """`if ddp: init_process_group(...); world_size = int(os.environ["WORLD_SIZE"])` and
        `else: world_size = 1`: a name bound twice, in the two branches of one `if`, to the
        world size (or the rank) in the branch that sets up the process group, and to what
        one process has (1 processes, rank 0) in the other: the Accelerator's value on both
        paths. A branch without the set-up is a choice (`world_size = 1` to read all the
        data), not one process."""
        name = name_value(expr) if isinstance(expr, ast.Name) else None
        bindings = scope.assigns(name) if name is not None else []
        if len(bindings) != 2 or any(b.unpacked or b.value is None for b in bindings):
            return False
        single = 1 if expected[0] == NUM_PROCESSES else 0
        for named, alone in (bindings, bindings[::-1]):
            here, there = named.statement.block, alone.statement.block
            if (
                here.parent is None
                or here.parent is not there.parent
                or here.owner is not there.owner
                or not isinstance(here.owner, ast.If)
                or {here.field, there.field} != {"body", "orelse"}
                or constant(alone.value) != single
                or isinstance(constant(alone.value), bool)
            ):
                continue
            value = named.value
            if (
                _names(value, scope, facts, self.imports, *expected)
                or env_kind(value, self.imports) == expected[0]
            ) and any(
                init.scope is scope and init.statement.ancestor_in(here) is not None
                for init in self.inits
            ):
                return True
        return False

    def _handed(self, scope: Scope, name: str, callee: Scope, parameter: str) -> bool:
        """`setup(rank, world_size)` in `scope` hands `name` to `callee`'s `parameter`."""
        for site, _qualified in self.sites:
            if site.scope is not scope or self.functions.get(name_value(site.node.func)) is not (
                callee
            ):  # fmt: skip
                continue
            argument = argument_for(site.node, callee, parameter)
            if isinstance(argument, ast.Name) and argument.id == name:
                return True
        return False


def _names(expr, scope: Scope, facts: DistributedFacts, imports, kind: str, getter: str) -> bool:
    """`expr` is the world size (or the rank): `dist.get_world_size()`, a helper of that name
    (`misc.get_world_size()`), or a name bound once to one, or a name MIG010 knows as it."""
    if isinstance(expr, ast.Call) and not expr.args and not expr.keywords:
        qualified = imports.qualify(expr.func) or ""
        return RANK_CALLS.get(qualified) == kind or qualified.rsplit(".", 1)[-1] == getter
    name = name_value(expr)
    if name is None or not isinstance(expr, ast.Name):
        return False
    if facts.kind_of(scope, name) == kind:
        return True
    bindings = scope.assigns(name)
    return (
        len(bindings) == 1
        and not bindings[0].unpacked
        and bindings[0].value is not None
        and _names(bindings[0].value, scope, facts, imports, kind, getter)
    )


def logging_print(use, sites: list) -> CallSite | None:
    """The `print(...)` statement that only shows the sampler (`print("Sampler = %s" %
    str(sampler))`): it goes with the sampler."""
    for site, qualified in sites:
        if (
            qualified == "print"
            and site.statement is use.statement
            and whole_statement(site)
            and contains(site.node, use.node)
            and _shown_as_is(site.node, use.node)
        ):
            return site
    return None


def _shown_as_is(call: ast.Call, node: ast.AST) -> bool:
    """The sampler itself is printed (`print(s)`, `str(s)`, `"%s" % s`, `f"{s}"`), not a value
    computed from it (`len(s)`, `s.num_samples`): only then does the print say nothing else."""
    parents = {id(c): p for p in ast.walk(call) for c in ast.iter_child_nodes(p)}
    while True:
        parent = parents.get(id(node))
        if parent is call:
            return node in call.args
        if isinstance(parent, (ast.FormattedValue, ast.JoinedStr, ast.Tuple)):
            node = parent
            continue
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mod) and node is (
            parent.right
        ):  # fmt: skip
            node = parent
            continue
        if isinstance(parent, ast.Call) and name_value(parent.func) in ("str", "repr") and (
            parent.args == [node]
        ):  # fmt: skip
            node = parent
            continue
        return False


def batch_loader(use, scope: Scope, imports, sites: list) -> BatchLoader | str | None:
    """None when `use` is not the sampler handed to a BatchSampler; the BatchLoader where the
    batch sampler only feeds one DataLoader's `batch_sampler=`; else why not (a reason)."""
    call = use.call
    if use.kind != "arg" or call is None or (imports.qualify(call.func) or "") not in (
        BATCH_SAMPLERS
    ):  # fmt: skip
        return None
    if keyword_value(call, "sampler", 0) is not use.node:
        return None
    where = f"is handed to the BatchSampler at line {call.lineno}"
    small = next((s.small for s, _ in sites if s.node is call), None)
    batch_size = keyword_value(call, "batch_size", 1)
    drop_last = keyword_value(call, "drop_last", 2)
    if (
        not isinstance(small, ast.Assign)
        or small.value is not call
        or len(small.targets) != 1
        or not isinstance(small.targets[0], ast.Name)
        or any(a.star for a in call_args(call))
        or batch_size is None
        or drop_last is None
        or not (_movable(batch_size, scope) and _movable(drop_last, scope))
    ):
        return f"{where}, not bound to one name with a plain batch size and drop_last"
    name = small.targets[0].id
    bindings = scope.assigns(name)
    if len(bindings) != 1:
        return f"{where}, whose name `{name}` is bound more than once"
    uses = scope.uses.get(name, [])
    if len(uses) != 1 or any(c.uses.get(name) for c in scope.children if not c.is_local(name)):
        return f"{where}, whose name `{name}` is used beyond one DataLoader's `batch_sampler=`"
    loader = uses[0].call
    if uses[0].kind != "arg" or loader is None or not patterns.is_loader_call(loader, imports):
        return f"{where}, whose name `{name}` is used beyond one DataLoader's `batch_sampler=`"
    args = call_args(loader)
    arg = next((a for a in args if a.value is uses[0].node), None)
    if (
        arg is None
        or arg.keyword != "batch_sampler"
        or sum(1 for a in args if a.plain) > 1
        or any(a.star or a.keyword in BATCH_OPTIONS for a in args)
    ):
        return (f"{where}, whose DataLoader at line {loader.lineno} takes it other than as its "
                "only batching option `batch_sampler=`")  # fmt: skip
    return BatchLoader(bindings[0], loader, arg, batch_size, drop_last)


def _movable(expr: ast.expr, scope: Scope) -> bool:
    """A value that means the same at the loader as at the BatchSampler: constants, and names
    (or their attributes) the scope binds at most once."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and len(scope.assigns(node.id)) > 1:
            return False
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Constant, ast.BinOp, ast.operator,
                                 ast.expr_context, ast.UnaryOp, ast.unaryop)):  # fmt: skip
            return False
    return True


def constant(expr: ast.expr):
    return expr.value if isinstance(expr, ast.Constant) else None
