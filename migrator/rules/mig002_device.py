"""MIG002 device: the device variable becomes `accelerator.device` (or goes, when nothing uses it
after the other rewrites); literal devices in training code (`"cuda"`, `torch.device("cuda")`,
`.cuda()` on tensors that keep their placement) are retargeted to `accelerator.device`."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import diagnostics, patterns
from migrator.analysis.model.chains import chain_text
from migrator.analysis.model.origins import (
    argument_for,
    calls_of,
    handed_to_parameter,
    scopes_seeing,
)
from migrator.analysis.syntax.index import Binding, Line, Scope
from migrator.analysis.syntax.views import call_args
from migrator.arglists import call_items
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.cpu_conditions import FALSE, deps, render
from migrator.rules.cpu_request import cpu_request, places_off_cpu
from migrator.rules.device_requests import CpuRequests
from migrator.rules.mig004_batch_placement import drop_guards_if_emptied
from migrator.rules.model_tensors import model_tensors
from migrator.rules.placement_calls import strip_placement
from migrator.rules.trainer_devices import only_for_the_trainer


class Device(Rule):
    code = "MIG002"
    name = "device"
    summary = "device = accelerator.device (removed when unused); literal devices retargeted"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        self._cpu_flag(context)
        self._device_variables(context)
        self._literal_devices(context)
        self._first_gpu_pins(context)
        model_tensors(context)

    def _first_gpu_pins(self, context: RuleContext) -> None:
        """`torch.cuda.set_device(0)` in a one-device program ("the GPU") goes: the
        Accelerator made each process's own GPU current, and pinning the first one put every
        process's `.cuda()` tensors on GPU 0 beside models on their own GPUs (h10 review). A
        native DDP program's `set_device(rank)` is MIG010's."""
        if context.facts.distributed.present:
            return
        imports = context.facts.index.imports
        for site in context.facts.index.calls():
            if (imports.qualify(site.node.func) or "") != "torch.cuda.set_device":
                continue
            args = site.node.args
            first = args[0] if len(args) == 1 and not site.node.keywords else None
            if not (isinstance(first, ast.Constant) and first.value in (0, "cuda:0")):
                continue
            if not isinstance(site.small, ast.Expr) or site.small.value is not site.node:
                continue
            context.edits.remove(site.small)
            context.edits.clean_up(site.small)
            drop_guards_if_emptied(context, site.statement)
            context.findings.append(Finding(code=self.code, level="note", node=site.node,
                message=(
                "`torch.cuda.set_device(0)` goes: each process's GPU is the Accelerator's "
                "(`accelerator.device`, made current for it); set, every process's `.cuda()` "
                "tensors would go to the first GPU")))  # fmt: skip

    # -- `Accelerator(cpu=...)` --------------------------------------------------------------
    def _cpu_flag(self, context: RuleContext) -> None:
        """The CPU the original's model and batches were placed on where CUDA is present
        (`--no-cuda`, `--device cpu`) becomes `Accelerator(cpu=...)` (cpu_request.py)."""
        if context.facts.accelerator_names:
            return  # already on the target: its Accelerator says where it runs
        cond, unread, sites = cpu_request(context)
        texts = {context.source.text_of(node).strip(): node for node in reversed(unread)}
        for node in sorted(texts.values(), key=lambda n: (n.lineno, n.col_offset)):
            context.findings.append(Finding(code=self.code, level="note", node=node, message=(
                f"where the original trained is decided by "
                f"`{context.source.text_of(node).strip()}` (line {node.lineno}), which this "
                "tool cannot read: the Accelerator gets no `cpu=`, so it trains on this "
                "process's GPU wherever there is one; pass `cpu=` to `Accelerator(...)` if "
                "that choice can be the CPU")))  # fmt: skip
        if cond != FALSE:
            code = render(cond)
            note = Finding(code=self.code, level="note", node=sites[0] if sites else None,
                           message=(
                f"the original trains on the CPU when `{code}`, but the Accelerator must be "
                "made before that can be read, so it gets no `cpu=` and trains on this "
                "process's GPU wherever there is one; make the Accelerator after it and pass "
                f"`cpu={code}` by hand"))  # fmt: skip
            context.add_kwarg("cpu", code, deps(cond), unless_placed=note)

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
            branches = _device_only_if(context.facts.index, bindings, context.edits.removals)
            if branches is not None:
                # `if accel: device = ... else: device = ...` collapses to one line, or goes.
                self._collapse(context, branches, bindings[0].name, used)
                continue
            placements = only_for_the_trainer(context, scope, bindings[0].name) if used else None
            if placements is not None:
                for site in placements:  # `model.to(device)` before `Trainer(model, device)`
                    if strip_placement(site.node, {bindings[0].name}, facts.index.imports,
                                       context.edits):  # fmt: skip
                        context.edits.clean_up(site.small)
                continue
            removable = all(not b.unpacked and isinstance(b.small, ast.Assign) for b in bindings)
            if removable and not used:
                for binding in bindings:
                    context.edits.remove(binding.small)
                continue
            for binding in bindings:
                node = self._value(binding)
                if node is None or patterns.is_accelerator_device(node, facts.accelerator_names):
                    continue
                context.edits.replace_with(node, context.accelerator_expr("device"))
                context.need_accelerator_at(binding.statement)
            if any(_string_valued(self._value(b)) for b in bindings):
                self._compared_as_strings(context, scope, bindings[0].name)

    def _collapse(self, context: RuleContext, statement, name: str, used: bool) -> None:
        if not used:
            context.edits.remove(statement.node)
            return
        line = f"{name} = {context.accelerator}.device"
        context.edits.replace(
            statement.node, lambda _text, r: line + r.newline, drops=[statement.node]
        )
        context.need_accelerator_at(statement)

    def _compared_as_strings(self, context: RuleContext, scope: Scope, name: str, depth=0):
        """`device = "cuda" if ... else "cpu"` compared with a string (`if device == "cuda":`)
        was a string; `accelerator.device` is a torch.device, which equals no string, so the
        comparison reads its type: `device.type == "cuda"`; in this file's functions it is
        handed to too (`train(model, loader, device)`). So does a diagnostic that takes the
        device as text (`torchsummary.summary(model, size, device=device)`)."""
        for current in scopes_seeing(scope, name):
            for use in current.uses.get(name, []):
                if id(use.node) in context.edits.dropped_names:
                    continue
                handed = (
                    handed_to_parameter(context.facts.index, use, current)
                    if use.kind == "arg" and depth < 3
                    else None
                )
                if handed is not None:
                    if _every_call_hands(context.facts.index, *handed, name):
                        self._compared_as_strings(context, *handed, depth + 1)
                    continue
                if use.kind == "arg" and diagnostics.takes_device_text(use.callee):
                    context.edits.replace_with(use.node, f"{name}.type")  # `device="cuda"`
                    continue
                statement = use.statement.node
                roots = statement.body if isinstance(statement, Line) else [statement]
                for node in (found for root in roots for found in ast.walk(root)):
                    if isinstance(node, ast.Compare) and _compares_with_text(node, use.node):
                        context.edits.replace_with(use.node, f"{name}.type")
                        break

    @staticmethod
    def _value(binding: Binding):
        return binding.element if binding.unpacked else binding.value

    def _still_used(self, context: RuleContext, scope: Scope, name: str) -> bool:
        dropped = context.edits.dropped_names
        if name in scope.declared_global:  # `global device` in main(): the module's variable
            scope = context.facts.index.module_scope
        for current in scopes_seeing(scope, name):
            for use in current.uses.get(name, []):
                if id(use.node) not in dropped:
                    return True
        return False

    # -- literals ----------------------------------------------------------------------------
    def _literal_devices(self, context: RuleContext) -> None:
        facts = context.facts
        imports = facts.index.imports
        requests = CpuRequests(context)
        host_copies = places_off_cpu(context)
        for scope in facts.training_scopes:
            devices = facts.device_names(scope)
            for site in scope.calls:
                call = site.node
                if context.edits.has_replacement(call) or diagnostics.is_diagnostic(site.callee):
                    continue  # `summary(model, size, device="cpu")` keeps its own device
                kind = patterns.placement_call(call, devices, imports)
                if kind == "cuda":
                    self._retarget(context, site, call, self._cuda_to_accelerator(context, call),
                                   whole=False)  # fmt: skip
                    continue
                args = call_args(call)
                for position, arg in enumerate(args):
                    keyword = arg.keyword
                    literal = (
                        patterns.is_device_constructor(arg.value, imports)
                        or _flag(requests, arg.value, scope)  # `device=args.device`
                    ) and not self._host_copy(context, call, site, host_copies)
                    positional_to = kind == "to" and keyword is None and position == 0
                    if literal and (keyword == "device" or positional_to):
                        if patterns.has_explicit_index(arg.value):
                            continue  # `cuda:1` pins a GPU: a finding, not a retarget
                        code = context.accelerator_expr("device")
                        self._retarget(context, site, arg.value,
                                       lambda _t, _r, c=code: c, whole=True)  # fmt: skip

    @staticmethod
    def _host_copy(context: RuleContext, call: ast.Call, site, host_copies: bool) -> bool:
        """`x.to("cpu")` copies to the host (SPEC §3b.5) where the script places anything
        off the CPU (`host_copies`): it stays. In a script that computes on the CPU alone it
        is the placement, and goes to the accelerator's device like any other."""
        imports = context.facts.index.imports
        if patterns.moves_off_device(call, site.small, imports):
            return True
        return host_copies and patterns.moves_to_cpu(call, imports)

    def _cuda_to_accelerator(self, context: RuleContext, call: ast.Call):
        """`x.cuda(...)` -> `x.to(accelerator.device)`, whitespace inside the brackets kept."""
        device = context.accelerator_expr("device")

        def rewrite(_text: str, renderer) -> str:
            source = renderer.source
            func = call.func
            receiver_end = source.own_span(func.value)[1]
            name_start = source.end(func) - len(func.attr)
            func_text = (renderer.text_of(func.value) + source.text[receiver_end:name_start]
                         + "to")  # fmt: skip
            items = call_items(renderer, call, func_text=func_text)
            return items.head + items.lead + device + ")"

        return rewrite

    @staticmethod
    def _retarget(context: RuleContext, site, node, render, whole: bool) -> None:
        if context.edits.has_replacement(node):
            return
        if whole:
            context.edits.replace(node, render, drops=[node])
        else:
            context.edits.rewrite(node, render, drops=[node])
        context.need_accelerator_at(site.statement)


def _flag(requests: CpuRequests, expr: ast.expr, scope: Scope) -> bool:
    """`args.device`, `cfg.train.device`: the device the user names on the command line or in
    a config; not a model's or a batch's `.device`, not `self.device` (a device variable)."""
    text = chain_text(expr) if isinstance(expr, ast.Attribute) else None
    if text is None or text.startswith(patterns.SELF + ".") or "cpu" in expr.attr.lower():
        return False
    if not patterns.looks_like_device_name(expr.attr):
        return False
    return requests.config_holder(expr, scope) and not (
        patterns.is_accelerator_device(expr, requests.facts.accelerator_names)
        or requests.follows_object(expr.value, scope)
    )


def _device_only_if(index, bindings: list[Binding], removed=frozenset()):
    """The `if` statement whose every branch is just one of these device assignments (once the
    statements other rules remove, such as MIG010's `torch.cuda.set_device`, are gone), or None."""
    parents = {id(b.statement.block.parent) for b in bindings}
    parent = bindings[0].statement.block.parent
    if len(parents) != 1 or parent is None or not isinstance(parent.node, ast.If):
        return None
    smalls = {id(b.small) for b in bindings}
    node = parent.node
    while node is not None:
        if not _only_one_of(_live(_statements(index, node, "body"), removed), smalls):
            return None
        if not node.orelse:
            return None  # without an else the old value may survive: not ours to fold
        first = node.orelse[0]
        if len(node.orelse) == 1 and isinstance(first, ast.If) and index.block(first) is not None \
                and index.block(first).parent is parent:  # fmt: skip
            node = first  # an elif
            continue
        if not _only_one_of(_live(_statements(index, node, "orelse"), removed), smalls):
            return None
        node = None
    return parent


def _statements(index, node, field: str) -> list:
    block = index.block(node, field)
    return block.statements if block is not None and block.kind != "suite" else []


def _only_one_of(statements: list, smalls: set[int]) -> bool:
    return (
        len(statements) == 1
        and isinstance(statements[0], Line)
        and len(statements[0].body) == 1
        and id(statements[0].body[0]) in smalls
    )


def _live(statements, removed) -> list:
    return [
        s
        for s in statements
        if id(s) not in removed
        and not (isinstance(s, Line) and all(id(small) in removed for small in s.body))
    ]


DEVICE_TYPES = {"cuda", "cpu", "mps", "xpu"}


def _string_valued(node) -> bool:
    """`"cuda"`, `"cuda" if c else "cpu"`: a device written as a string."""
    if isinstance(node, ast.IfExp):
        return _string_valued(node.body) and _string_valued(node.orelse)
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _compares_with_text(compare: ast.Compare, operand: ast.AST) -> bool:
    """`operand == "cuda"` / `"cpu" != operand`: an equality of the operand with a device
    type written as a string."""
    operands = [compare.left, *compare.comparators]
    if not any(o is operand for o in operands) or not all(
        isinstance(op, (ast.Eq, ast.NotEq)) for op in compare.ops
    ):
        return False
    return any(
        isinstance(o, ast.Constant) and o.value in DEVICE_TYPES
        for o in operands
        if o is not operand
    )


def _every_call_hands(index, function: Scope, parameter: str, name: str) -> bool:
    """Every call of `function` the program makes passes `name` (the device) as `parameter`:
    its comparisons may read `.type`. A call passing anything else (`run(model, "cpu")`)
    would compare a string's `.type`: the function is left as it is."""
    sites = calls_of(index, function)
    return bool(sites) and all(
        patterns.name_of(argument_for(site.node, function, parameter)) == name for site in sites
    )
