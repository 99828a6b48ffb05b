"""Reading the objects native DDP builds around the model and the data: DistributedDataParallel
wrappers, DistributedSampler (named or inline, and every place it is used), and all-reduces of
metrics. A part of distributed.py's reader, kept in its own module for size."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.facts import (
    DDP_OPTIONS_KEPT,
    FALLBACK_SAMPLERS,
    LOCAL_NAME,
    LOCAL_PROCESS_INDEX,
    REDUCE_OPS,
    DistributedFacts,
    RankName,
    Reduction,
    Sampler,
    Wrap,
    contains,
    keyword_value,
    whole_statement,
)
from migrator.analysis.distributed.sampler_hand_offs import handed_to_set_epoch
from migrator.analysis.distributed.sampler_shapes import (
    batch_loader,
    constant,
    logging_print,
    option_problem,
)
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import CallSite, Line, ModuleIndex, Scope
from migrator.analysis.syntax.views import call_args, name_value


class ObjectReader:
    index: ModuleIndex
    imports: object
    facts: DistributedFacts
    sites: list

    def _block(self, node, code: str, message: str, level: str = "warning") -> None:
        raise NotImplementedError

    def _constructor_ranks(self) -> None:
        """`Trainer(model, loader, optimizer, rank, ...)` in the function every process runs:
        the class's `__init__` parameter that receives the launch rank (or world size) goes
        with its argument, like the worker's own parameters, and its uses (`self.gpu_id =
        gpu_id`) read the Accelerator's value instead."""
        classes = {s.name: s for s in self.index.scopes if s.kind == "class"}
        for rank_name in list(self.facts.rank_names):
            if rank_name.binding is not None:
                continue
            for use in rank_name.scope.uses.get(rank_name.name, []):
                call = use.call
                owner = classes.get(name_value(call.func)) if use.kind == "arg" else None
                init = next((m for m in owner.children if m.kind == "function"
                             and m.name == "__init__"), None) if owner else None  # fmt: skip
                param = _parameter_receiving(call, init, use.node) if init else None
                if param is None or init.assigns(param) or self.facts.kind_of(init, param):
                    continue
                kind = LOCAL_PROCESS_INDEX if LOCAL_NAME.search(param) else rank_name.kind
                self.facts.remove_rank_param(init, param, kind)
                for binding in _copied_to_self(init, param):  # `self.gpu_id = gpu_id`
                    self.facts.rank_names.append(RankName(init, binding.name, kind, binding))

    def _wrap(self, site: CallSite) -> None:
        small = site.small
        inner = keyword_value(site.node, "module", 0)
        assigned = (
            isinstance(small, ast.Assign) and small.value is site.node and (len(small.targets) == 1)
        )
        target = small.targets[0] if assigned else None
        attribute = _instance_target(site, target, inner)
        if attribute is not None:  # a Trainer's `self.model = DDP(self.model | model, ...)`
            self.facts.wraps.append(Wrap(site, attribute, inner, attribute, _dropped(site)))
            return
        if inner is None or not isinstance(target, ast.Name):
            where = (f"is assigned to `{dotted_name(target)}`, not a local name"
                     if isinstance(target, ast.Attribute) and dotted_name(target)
                     else "is not assigned to a name")  # fmt: skip
            self._block(site.node, "MIG907", f"DistributedDataParallel(...) {where}; "
                        "migrate by hand")  # fmt: skip
            return
        target = target.id
        root = _unplaced(inner)
        inner_name = name_value(root)
        if inner_name != target and len(site.scope.assigns(target)) != 1:
            self._block(site.node, "MIG907", f"`{target}` is rebound after wrapping the model "
                        "in DistributedDataParallel; migrate by hand")  # fmt: skip
            return
        self.facts.wraps.append(Wrap(site, target, inner, inner_name, _dropped(site)))
        self._unwrapped_alias(site.scope, target)

    def _unwrapped_alias(self, scope: Scope, model: str) -> None:
        """`model_without_ddp = model` and, once wrapped, `model_without_ddp = model.module`
        (torchvision's references, DeiT): the name always means the plain model, so the
        `.module` rebinding goes and the first binding stays."""
        for name, bindings in scope.bindings.items():
            if name == model or any(b.unpacked or b.kind != "assign" for b in bindings):
                continue
            module = [b for b in bindings if isinstance(b.value, ast.Attribute)
                      and b.value.attr == "module" and name_value(b.value.value) == model]  # fmt: skip
            plain = [b for b in bindings if name_value(b.value) == model]
            if module and plain and len(module) + len(plain) == len(bindings):
                self.facts.aliases.append((scope, name, module))

    def _sampler(self, site: CallSite) -> None:
        shuffle = keyword_value(site.node, "shuffle", 3)
        sampler = Sampler(site=site, binding=None, shuffle=shuffle)
        problem = option_problem(site.node, site.scope, self.facts, self.imports,
                                 self.sites, self.index.functions)  # fmt: skip
        if problem is not None:
            self._block(site.node, "MIG907", f"DistributedSampler {problem}; migrate by hand")
            return
        loader = self._inline_loader_arg(site)
        if loader is not None:
            sampler.loader_args.append(loader)
            self.facts.samplers.append(sampler)
            return
        small = site.small
        scope = site.scope
        reason = "is not assigned to one name"
        if (
            isinstance(small, ast.Assign)
            and _sampler_or_fallback(small.value, site.node, lambda v: self._fallback(v, sampler))
            and len(small.targets) == 1
            and isinstance(small.targets[0], ast.Name)
        ):
            name = small.targets[0].id
            bindings = scope.assigns(name)
            own = next((b for b in bindings if b.small is small), None)
            others = [b for b in bindings if b is not own]
            if own is None or (others and not self._single_process_fallbacks(sampler, own, others)):
                lines = ", ".join(str((b.small or b.statement.node).lineno) for b in others)
                reason = (f"`{name}` is also bound at line(s) {lines}, not as the `else:` "
                          "None/RandomSampler/SequentialSampler of the same `if`")  # fmt: skip
            else:
                reason = self._sampler_uses(sampler, scope, name)
                if reason is None:
                    sampler.binding = own
                    sampler.fallbacks = others
                    self.facts.samplers.append(sampler)
                    return
        self._block(site.node, "MIG907", f"DistributedSampler {reason}: only a DataLoader's "
                    "`sampler=` and `set_epoch` are migrated; migrate by hand")  # fmt: skip

    def _single_process_fallbacks(self, sampler: Sampler, own, others) -> bool:
        """`if args.distributed: sampler = DistributedSampler(ds)` whose `else:` binds the same
        name to None, `RandomSampler(ds)` or `SequentialSampler(ds)` (matching the
        DistributedSampler's shuffle), or the same with the branches the other way round
        (`if not distributed: sampler = None` / `else: sampler = DistributedSampler(ds)`):
        the whole choice becomes the loader's own shuffle."""
        parent = own.statement.block.parent
        field = own.statement.block.field
        if parent is None or not isinstance(parent.node, ast.If):
            return False
        if field not in ("body", "orelse"):
            return False
        fallback_field = "orelse" if field == "body" else "body"
        for binding in others:
            block = binding.statement.block
            if block.parent is not parent or block.field != fallback_field or binding.kind != (
                "assign"
            ) or binding.unpacked:  # fmt: skip
                return False
            if not self._fallback(binding.value, sampler):
                return False
        return True

    def _fallback(self, value: ast.expr | None, sampler: Sampler) -> bool:
        """None, or the single-process sampler of the DistributedSampler's shuffle."""
        if name_value(value) == "None":
            return True
        if not isinstance(value, ast.Call):
            return False
        shuffle = True if sampler.shuffle is None else constant(sampler.shuffle)
        kind = FALLBACK_SAMPLERS.get(self.imports.qualify(value.func) or "")
        return kind is not None and shuffle is kind

    def _inline_loader_arg(self, site: CallSite):
        for other, _ in self.sites:
            if other.scope is site.scope and patterns.is_loader_call(other.node, self.imports):
                for arg in call_args(other.node):
                    if arg.value is site.node and arg.keyword == "sampler":
                        return other.node, arg
        return None

    def _sampler_uses(self, sampler: Sampler, scope: Scope, name: str) -> str | None:
        """None when every use of the sampler is one MIG010 rewrites, else what is not."""
        for use in scope.uses.get(name, []):
            call = use.call
            if (
                use.kind == "arg"
                and call is not None
                and patterns.is_loader_call(call, self.imports)
            ):
                arg = next((a for a in call_args(call) if a.value is use.node), None)
                if arg is not None and arg.keyword == "sampler":
                    sampler.loader_args.append((call, arg))
                    continue
            if use.kind == "attr" and use.attr == "set_epoch" and call is not None:
                site = next((s for s, _ in self.sites if s.node is call), None)
                if site is not None and whole_statement(site):
                    self.facts.removed_calls.append(site)
                    continue
            if self._in_loader_shuffle(use, name) or _guards_set_epoch(use, name):
                continue
            if self._returned_to_set_epoch(use, scope, sampler):
                continue
            if handed_to_set_epoch(self, use, scope, name, sampler):
                continue
            shown = logging_print(use, self.sites)  # `print("Sampler = %s" % str(sampler))`
            if shown is not None:
                self.facts.removed_calls.append(shown)
                continue
            batches = batch_loader(use, scope, self.imports, self.sites)
            if isinstance(batches, str):
                return f"`{name}` {batches}"
            if batches is not None:
                sampler.batch_loaders.append(batches)
                continue
            return f"`{name}` is used at line {use.node.lineno}"
        for child in scope.children:
            if not child.is_local(name) and child.uses.get(name):
                return f"`{name}` is used inside `{child.name}`"
        return None

    def _returned_to_set_epoch(self, use, scope: Scope, sampler: Sampler) -> bool:
        """`return train_loader, train_sampler` of a loader factory whose every caller
        unpacks the sampler into a name it only `set_epoch`s (`loader, sampler = get_data()`;
        `sampler.set_epoch(epoch)`): the factory returns None there and the calls go."""
        small = use.statement.node.body[0] if isinstance(use.statement.node, Line) else None
        value = small.value if isinstance(small, ast.Return) else None
        if not isinstance(value, ast.Tuple) or scope.kind != "function":
            return False
        position = next((i for i, e in enumerate(value.elts) if e is use.node), None)
        callers = [site for site, _ in self.sites
                   if self.index.functions.get(name_value(site.node.func) or "") is scope]  # fmt: skip
        if position is None or not callers:
            return False
        removed = []
        for site in callers:
            target = _unpacked_into(site, len(value.elts), position)
            if target is None or len(site.scope.assigns(target)) != 1:
                return False
            for other in site.scope.uses.get(target, []):
                call = other.call if other.kind == "attr" and other.attr == "set_epoch" else None
                found = next((s for s, _ in self.sites if s.node is call), None)
                if found is None or not whole_statement(found):
                    return False
                removed.append(found)
            if any(not c.is_local(target) and c.uses.get(target) for c in site.scope.children):
                return False
        self.facts.removed_calls.extend(removed)
        sampler.returned.append(use.node)
        return True

    def _in_loader_shuffle(self, use, name: str) -> bool:
        """`shuffle=(sampler is None)` in the loader the sampler feeds (rewritten with it)."""
        for site, _ in self.sites:
            if site.statement is not use.statement or not patterns.is_loader_call(
                site.node, self.imports
            ):
                continue
            shuffle = next((a for a in call_args(site.node) if a.keyword == "shuffle"), None)
            feeds = keyword_value(site.node, "sampler")
            if shuffle is not None and name_value(feeds) == name:
                return contains(shuffle.value, use.node)
        return False

    def _reduction(self, site: CallSite) -> bool:
        tensor = keyword_value(site.node, "tensor", 0)
        op = keyword_value(site.node, "op", 1)
        extra = [a for a in site.node.keywords if a.arg is not None and a.arg not in (
            "tensor", "op")]  # fmt: skip
        reduction = "sum" if op is None else REDUCE_OPS.get(
            (dotted_name(op) or "").rsplit("ReduceOp.", 1)[-1] if "ReduceOp." in (
                dotted_name(op) or "") else "")  # fmt: skip
        if name_value(tensor) is None or reduction is None or extra or not (whole_statement(site)):
            self.facts.collectives.append(site)
            return True
        self.facts.reductions.append(Reduction(site, name_value(tensor), reduction))
        return True


def _copied_to_self(init: Scope, param: str) -> list:
    """The bindings `self.x = param` of `__init__` (each `self.x` bound there once)."""
    found = []
    for name, bindings in init.bindings.items():
        if not name.startswith(patterns.SELF + ".") or len(bindings) != 1:
            continue
        binding = bindings[0]
        if (
            binding.kind == "assign"
            and not binding.unpacked
            and (name_value(binding.value) == param)
        ):
            found.append(binding)
    return found


def _parameter_receiving(call: ast.Call, init: Scope, argument: ast.AST) -> str | None:
    """The `__init__` parameter (after `self`) that `argument` of `Class(...)` binds."""
    positional = [p for p in init.params if not p.startswith("*")][1:]
    for item in call.keywords:
        if item.value is argument:
            return item.arg if item.arg in positional else None
    for position, value in enumerate(call.args):
        if isinstance(value, ast.Starred):
            return None
        if value is argument:
            return positional[position] if position < len(positional) else None
    return None


def _dropped(site: CallSite) -> list[str]:
    """The wrapper's options prepare does not reproduce by itself; `**kwargs` among them, as
    `**name` (its keys are unknown here)."""
    found = []
    for a in call_args(site.node):
        if a.star == "**":
            found.append(f"**{ast.unparse(a.value)}")
        elif a.keyword is not None and a.keyword not in DDP_OPTIONS_KEPT:
            found.append(a.keyword)
    return found


def _instance_target(site: CallSite, target: ast.expr | None, inner: ast.expr | None):
    """`self.model` for a Trainer's `self.model = DDP(self.model, ...)`, or for
    `self.model = DDP(model, ...)` where every other binding of `self.model` in the method is
    `self.model = model` (or `model.to(...)`): the wrapper stands for the attribute, so removing
    the statement leaves the plain model on `self`. None for any other shape."""
    name = dotted_name(target) if isinstance(target, ast.Attribute) else None
    if name is None or not name.startswith(patterns.SELF + ".") or name.count(".") != 1:
        return None
    root = _unplaced(inner)
    inner_name = dotted_name(root) if isinstance(root, ast.Attribute) else name_value(root)
    if inner_name is None or root is not inner:
        return None
    if inner_name == name:
        return name
    others = [b for b in site.scope.assigns(name) if b.small is not site.small]
    if not others or inner_name.startswith(patterns.SELF + "."):
        return None
    for binding in others:
        value = binding.value
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and (value.func.attr in ("to", "cuda"))
        ):
            value = value.func.value
        if binding.unpacked or name_value(value) != inner_name:
            return None
    return name if len(site.scope.assigns(inner_name)) == 0 else None


def _sampler_or_fallback(value: ast.expr, sampler: ast.Call, fallback) -> bool:
    """`DistributedSampler(...)`, or `DistributedSampler(...) if distributed else None` (or
    else the single-process sampler of its shuffle, `fallback`, either way round): without the
    sampler the loader's own `shuffle=` decides, which is what the rewrite restores."""
    if value is sampler:
        return True
    if not isinstance(value, ast.IfExp):
        return False
    branches = (value.body, value.orelse)
    return any(b is sampler for b in branches) and any(
        b is not sampler and fallback(b) for b in branches
    )


def _unpacked_into(site: CallSite, size: int, position: int) -> str | None:
    """The name `a, b, c = f(...)` binds at `position` of `size` targets, if the call is so."""
    small = site.small
    if not isinstance(small, ast.Assign) or small.value is not site.node or len(small.targets) != 1:
        return None
    target = small.targets[0]
    if not isinstance(target, ast.Tuple) or len(target.elts) != size:
        return None
    return (
        name_value(target.elts[position]) if isinstance(target.elts[position], ast.Name) else None
    )


def _guards_set_epoch(use, name: str) -> bool:
    """`if sampler is not None: sampler.set_epoch(epoch)`: the test goes with its only body."""
    node = use.statement.node
    if not isinstance(node, ast.If) or node.orelse or not contains(node.test, use.node):
        return False
    return all(
        isinstance(small, ast.Expr) and isinstance(small.value, ast.Call)
        and isinstance(small.value.func, ast.Attribute)
        and small.value.func.attr == "set_epoch"
        and isinstance(small.value.func.value, ast.Name)
        and small.value.func.value.id == name
        for small in node.body
    )  # fmt: skip


def _unplaced(expr: ast.expr) -> ast.expr:
    """`model` for `model.to(device).cuda()`: the expression under its device placements."""
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in ("to", "cuda")
    ):
        expr = expr.func.value
    return expr
