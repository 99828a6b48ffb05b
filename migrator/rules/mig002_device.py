"""MIG002 device: the device variable becomes `accelerator.device` (or goes, when nothing uses it
after the other rewrites); literal devices in training code (`"cuda"`, `torch.device("cuda")`,
`.cuda()` on tensors that keep their placement) are retargeted to `accelerator.device`."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import patterns
from migrator.analysis.facts import class_methods, visible_scopes
from migrator.analysis.index import Binding, Scope
from migrator.rules.base import Rule, RuleContext


class Device(Rule):
    code = "MIG002"
    name = "device"
    summary = "device = accelerator.device (removed when unused); literal devices retargeted"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        self._device_variables(context)
        self._literal_devices(context)

    # -- `device = ...` ----------------------------------------------------------------------
    def _device_variables(self, context: RuleContext) -> None:
        facts = context.facts
        by_name: dict[tuple[int, str], list[Binding]] = {}
        for binding in facts.device_bindings:
            key = (id(binding.statement.block.scope), binding.name)
            by_name.setdefault(key, []).append(binding)
        for bindings in by_name.values():
            scope = bindings[0].statement.block.scope
            if all(patterns.is_accelerator_device(self._value(b), facts.accelerator_names)
                   for b in bindings):  # fmt: skip
                continue  # already migrated: never ours to remove
            used = self._still_used(context, scope, bindings[0].name)
            branches = _device_only_if(bindings, context.edits.removals)
            if branches is not None:
                # `if accel: device = ... else: device = ...` collapses to one line, or goes.
                self._collapse(context, branches, bindings[0].name, used)
                continue
            removable = all(not b.unpacked and isinstance(b.small, cst.Assign) for b in bindings)
            if removable and not used:
                for binding in bindings:
                    context.edits.remove(binding.small)
                continue
            for binding in bindings:
                node = self._value(binding)
                if node is None or patterns.is_accelerator_device(node, facts.accelerator_names):
                    continue
                replacement = context.accelerator_expr("device")
                context.edits.replace_with(node, replacement)
                context.need_accelerator_at(binding.statement)

    def _collapse(self, context: RuleContext, statement, name: str, used: bool) -> None:
        if not used:
            context.edits.remove(statement.node)
            return
        line = context.statement(f"{name} = {context.accelerator}.device\n")

        def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
            return line.with_changes(leading_lines=updated.leading_lines)

        context.edits.replace(statement.node, rewrite, drops=[statement.node])
        context.need_accelerator_at(statement)

    @staticmethod
    def _value(binding: Binding):
        return binding.element if binding.unpacked else binding.value

    def _still_used(self, context: RuleContext, scope: Scope, name: str) -> bool:
        dropped = context.edits.dropped_names
        scopes = [s for m in class_methods(scope) for s in visible_scopes(m, name)]
        for current in scopes if name.startswith("self.") else visible_scopes(scope, name):
            for use in current.uses.get(name, []):
                if id(use.node) not in dropped:
                    return True
        return False

    # -- literals ----------------------------------------------------------------------------
    def _literal_devices(self, context: RuleContext) -> None:
        facts = context.facts
        imports = facts.index.imports
        for scope in facts.training_scopes:
            devices = facts.device_names(scope)
            for site in scope.calls:
                call = site.node
                if context.edits.has_replacement(call):
                    continue
                kind = patterns.placement_call(call, devices, imports)
                if kind == "cuda":
                    self._retarget(context, site, call, self._cuda_to_accelerator(context))
                    continue
                for arg in call.args:
                    keyword = arg.keyword.value if arg.keyword is not None else None
                    literal = patterns.is_device_constructor(arg.value, imports)
                    positional_to = kind == "to" and keyword is None and arg is call.args[0]
                    if literal and (keyword == "device" or positional_to):
                        if patterns.has_explicit_index(arg.value):
                            continue  # `cuda:1` pins a GPU: a finding, not a retarget
                        replacement = context.accelerator_expr("device")
                        self._retarget(context, site, arg.value, lambda _u, r=replacement: r)

    def _cuda_to_accelerator(self, context: RuleContext):
        device = context.accelerator_expr("device")

        def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
            if not isinstance(updated, cst.Call) or not isinstance(updated.func, cst.Attribute):
                return updated
            func = updated.func.with_changes(attr=cst.Name("to"))
            return updated.with_changes(func=func, args=[cst.Arg(value=device)])

        return rewrite

    @staticmethod
    def _retarget(context: RuleContext, site, node: cst.CSTNode, rewriter) -> None:
        if context.edits.has_replacement(node):
            return
        context.edits.replace(node, rewriter, drops=[node])
        context.need_accelerator_at(site.statement)


def _device_only_if(bindings: list[Binding], removed: frozenset = frozenset()):
    """The `if` statement whose every branch is just one of these device assignments (once the
    statements other rules remove, such as MIG010's `torch.cuda.set_device`, are gone), or None."""
    parents = {id(b.statement.block.parent) for b in bindings}
    parent = bindings[0].statement.block.parent
    if len(parents) != 1 or parent is None or not isinstance(parent.node, cst.If):
        return None
    smalls = {id(b.small) for b in bindings}
    node = parent.node
    while node is not None:
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
        body = _live(body, removed)
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
            return None
        if len(body[0].body) != 1 or id(body[0].body[0]) not in smalls:
            return None
        orelse = node.orelse
        if orelse is None:
            return None  # without an else the old value may survive: not ours to fold
        node = orelse if isinstance(orelse, cst.If) else None
        if isinstance(orelse, cst.Else):
            tail = orelse.body.body if isinstance(orelse.body, cst.IndentedBlock) else []
            tail = _live(tail, removed)
            if len(tail) != 1 or not isinstance(tail[0], cst.SimpleStatementLine):
                return None
            if len(tail[0].body) != 1 or id(tail[0].body[0]) not in smalls:
                return None
    return parent


def _live(statements, removed) -> list:
    return [
        s
        for s in statements
        if id(s) not in removed
        and not (
            isinstance(s, cst.SimpleStatementLine) and all(id(small) in removed for small in s.body)
        )
    ]
