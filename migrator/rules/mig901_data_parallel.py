"""MIG901 DataParallel: single-process multi-GPU that `prepare` would wrap again in DDP.

In a file whose training is migrated, the wrapper goes (`net =
nn.DataParallel(net)` is removed, `model = nn.DataParallel(Net()).to(device)` keeps `Net()`),
`net.module` becomes `accelerator.unwrap_model(net)`, and a note says prepare's DDP (one
process per device) replaces it. Anywhere else it is reported and the file is left as it is.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import CallSite, Line
from migrator.analysis.syntax.views import call_args
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.checkpoint_keys import prefix_notes

PLACEMENT = ("to", "cuda")


def data_parallel_calls(context: RuleContext):
    imports = context.facts.index.imports
    found = []
    for site in context.facts.index.calls():
        qualified = imports.qualify(site.node.func) or ""
        if qualified in patterns.DATA_PARALLEL or (
            qualified == "DataParallel" and not imports.imported("DataParallel")
        ):
            found.append(site)
    return found


class DataParallel(Rule):
    code = "MIG901"
    name = "data-parallel"
    summary = "nn.DataParallel on the prepared model removed (prepare's DDP replaces it)"
    # `DataParallel` as named or imported, never inside `DistributedDataParallel` (MIG010's).
    triggers = (".DataParallel", " DataParallel", "(DataParallel", "=DataParallel",
                ",DataParallel", "\nDataParallel")  # fmt: skip
    detector = True

    def apply(self, context: RuleContext) -> None:
        sites = data_parallel_calls(context)
        plans = [_unwrap_plan(context, site) for site in sites]
        if sites and all(plan is not None for plan in plans) and "MIG006" in context.selected:
            wrapped = set()
            for site, (target, inner) in zip(sites, plans):
                _remove_wrapper(context, site, target, inner)
                wrapped.add(target)
                # `self.model`, or `model` for a submodule `model.features`
                held = target if target.startswith(patterns.SELF + ".") else target.split(".")[0]
                prepared = context.facts.role(site.scope, held) == "model"
                context.data_parallel_removed |= prepared  # its batches were split over GPUs
                why = ("accelerator.prepare wraps it in DDP, one process per device "
                       "(`migrate launch --nproc N`)" if prepared else
                       "it is not trained here, and each process runs it on its own device")  # fmt: skip
                context.findings.append(Finding(
                    code=self.code, level="note", node=site.node,
                    message=f"nn.DataParallel around `{target}` removed: {why}",
                ))  # fmt: skip
            _unwrap_module_uses(context, wrapped)
            lines = [(target, site.node.lineno) for site, (target, _i) in zip(sites, plans)]
            prefix_notes(context, lines, "nn.DataParallel")
            return
        for site in sites:
            context.findings.append(Finding(
                code=self.code,
                message="nn.DataParallel: remove it and run one process per device "
                "(`migrate launch --nproc N`); accelerator.prepare wraps the model in DDP",
                node=site.node,
            ))  # fmt: skip


def _unwrap_plan(context: RuleContext, site: CallSite) -> tuple[str, ast.expr] | None:
    """(the model's name, the wrapped expression) for `model = DataParallel(inner, ...)`
    (through `.to(...)` / `.cuda()`) in a file whose training is migrated: the model training
    prepares gets DDP from prepare, a model kept for inference runs as it is on each process."""
    facts = context.facts
    if not facts.has_training:
        return None
    small = site.small
    if not (isinstance(small, ast.Assign) and len(small.targets) == 1):
        return None
    value = small.value
    while value is not site.node:
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and value.func.attr in PLACEMENT):  # fmt: skip
            return None
        value = value.func.value
    target = patterns.name_of(small.targets[0])
    args = call_args(site.node)
    inner = args[0].value if args and args[0].keyword in (None, "module") else None
    part = dotted_name(small.targets[0]) if isinstance(small.targets[0], ast.Attribute) else None
    if target is None and part is not None and part == dotted_name(inner):
        return part, inner  # `model.features = DataParallel(model.features)`: a submodule
    if target is None or inner is None:  # the prepared model, or one kept for inference
        return None
    if isinstance(inner, ast.Call) or patterns.name_of(inner) is not None:
        return target, inner
    return None


def _remove_wrapper(context: RuleContext, site: CallSite, target: str, inner: ast.expr):
    if patterns.name_of(inner) == target or dotted_name(inner) == target:
        # `net = nn.DataParallel(net).cuda()` goes; `self.model = DataParallel(net)` keeps `net`
        context.edits.remove(site.small)
        for enclosing in reversed(site.statement.chain()[:-1]):
            if not isinstance(enclosing.node, ast.If):
                break
            context.edits.drop_if_emptied.add(id(enclosing.node))
        return
    drops = [site.node.func, *(a.node for a in call_args(site.node)[1:])]
    context.edits.replace(site.node, lambda _t, r: r.text_of(inner, parens=False), drops=drops)


def _unwrap_module_uses(context: RuleContext, wrapped: set[str]) -> None:
    """`net.module` -> `accelerator.unwrap_model(net)` for the models that lost the wrapper."""
    facts = context.facts
    index = facts.index
    origins = set()
    for scope in index.scopes:
        for name in wrapped:
            found = facts.origin(scope, name)
            if found is not None:
                origins.add((id(found.scope), found.name))
    targets = {id(t) for node in ast.walk(context.tree)
               if isinstance(node, (ast.Assign, ast.Delete)) for t in node.targets}  # fmt: skip
    for scope in index.scopes:
        for name, uses in scope.uses.items():
            found = facts.origin(scope, name)
            if found is None or (id(found.scope), found.name) not in origins:
                continue
            for use in uses:
                if use.kind != "attr" or use.attr != "module":
                    continue
                attribute = _attribute_of(use.statement.node, use.node)
                if attribute is None or id(attribute) in targets:
                    continue
                unwrap = context.accelerator_expr("unwrap_model")
                context.edits.replace(attribute, lambda _t, r, a=attribute, u=unwrap:
                                      f"{u}({r.text_of(a.value)})")  # fmt: skip
                context.need_accelerator_at(use.statement)


def _attribute_of(statement: ast.AST, node: ast.AST) -> ast.Attribute | None:
    roots = statement.body if isinstance(statement, Line) else [statement]
    for candidate in (n for root in roots for n in ast.walk(root)):
        if (
            isinstance(candidate, ast.Attribute)
            and candidate.value is node
            and (candidate.attr == "module")
        ):
            return candidate
    return None
