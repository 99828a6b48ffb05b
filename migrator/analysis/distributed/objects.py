"""Reading the objects native DDP builds around the model and the data: DistributedDataParallel
wrappers (the samplers: sampler_reader.py), and all-reduces of metrics. A part of
distributed.py's reader, kept in its own module for size."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.facts import (
    DDP_OPTIONS_KEPT,
    LOCAL_NAME,
    LOCAL_PROCESS_INDEX,
    REDUCE_OPS,
    DistributedFacts,
    RankName,
    Reduction,
    Wrap,
    keyword_value,
    whole_statement,
)
from migrator.analysis.distributed.sampler_reader import SamplerReader
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import CallSite, ModuleIndex, Scope
from migrator.analysis.syntax.views import call_args, name_value


class ObjectReader(SamplerReader):
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
            isinstance(small, ast.Assign)
            and _placed_chain(small.value, site.node)  # `DDP(m).to(device)` too
            and len(small.targets) == 1
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


def _placed_chain(value: ast.expr, wrap: ast.Call) -> bool:
    """`value` is the wrap, or the wrap placed (`DDP(model, ...).to(device)`, `.cuda()`):
    the name it binds holds the wrapper."""
    while value is not wrap:
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("to", "cuda")
        ):
            return False
        value = value.func.value
    return True


def _unplaced(expr: ast.expr) -> ast.expr:
    """`model` for `model.to(device).cuda()`: the expression under its device placements."""
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in ("to", "cuda")
    ):
        expr = expr.func.value
    return expr
