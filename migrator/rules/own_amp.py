"""MIG020's AMP kept as the script wrote it: where the mixed precision cannot become the
Accelerator's (`mixed_precision=`), the script's own autocast and GradScaler stay, run on each
process as under torchrun DDP, and only the backward goes through the accelerator (which
then scales nothing itself). A note says so. A mixin of MixedPrecision (mig020)."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import bindings_of
from migrator.analysis.roles import explain
from migrator.analysis.syntax.views import name_value
from migrator.findings import Finding
from migrator.rules.base import RuleContext


class OwnAmp:
    def _unmade_scaler(self, context: RuleContext, scopes) -> bool:
        """`scaler.scale(loss).backward()` where this file makes no GradScaler `scaler` as one
        `GradScaler(...)` call (a helper's parameter, `GradScaler() if amp else None`): its
        dance cannot go, and the Accelerator must not scale a second time. The script's own
        autocast and GradScaler stay as written, on each process, as under torchrun DDP; the
        backward goes through the accelerator (`accelerator.backward(scaler.scale(loss))`)
        and the Accelerator gets no mixed_precision=. A note says so; True if so."""
        facts = context.facts
        for scope in scopes:
            for site in scope.calls:
                scale = site.receiver if site.method == "backward" else None
                func = scale.func if isinstance(scale, ast.Call) else None
                if not isinstance(func, ast.Attribute) or func.attr != "scale":
                    continue
                name = patterns.name_of(func.value)
                origin = facts.origin(scope, name) if name is not None else None
                made = [b for b in bindings_of(origin) if b.kind == "assign"
                        and isinstance(b.value, ast.Call)
                        and patterns.is_grad_scaler_call(b.value, facts.index.imports)]  # fmt: skip
                if made:
                    continue
                why = explain.untraceable(facts, scope, name) if name is not None else ""
                bound = bindings_of(origin)
                if bound and bound[0].value is not None:
                    why = (f"`{origin.name}` is set at line {bound[0].statement.node.lineno} "
                           f"to `{ast.unparse(bound[0].value)}`, not one GradScaler(...) call")  # fmt: skip
                context.findings.append(Finding(code="MIG020", level="note", node=site.node, message=(
                    f"`{ast.unparse(func)}(...)` at line {site.node.lineno} scales with a "
                    f"GradScaler this file does not make as such{': ' + why if why else ''}; "
                    "the script's own autocast and GradScaler are kept as written and run on "
                    "each process (the backward goes through accelerator.backward, the "
                    "Accelerator gets no mixed_precision=)")))  # fmt: skip
                return True
        return False

    def _kept_scaler(self, context: RuleContext, scopes) -> bool:
        """A GradScaler this file makes but uses beyond its dance (compared with None to choose
        a mixed-precision step, handed to a helper that does more than the dance): it stays,
        with the script's own autocast, as for a scaler the file does not make; a note. True
        if so."""
        for scope, name, binding in self._made_scalers(context, scopes):
            if not self._dance_only(context, scope, name):
                context.findings.append(Finding(code="MIG020", level="note", node=binding.value,
                    message=(f"GradScaler `{name}` (line {binding.statement.node.lineno}) is "
                             "used beyond scale/step/update/unscale_/state_dict: the script's own "
                             "autocast and GradScaler are kept as written and run on each process "
                             "(the backward goes through accelerator.backward, the Accelerator "
                             "gets no mixed_precision=)")))  # fmt: skip
                return True
        return False

    def _own_autocast(self, context: RuleContext, scopes) -> bool:
        """An autocast whose dtype or `enabled=` is chosen at run time from values the
        Accelerator cannot read where it is made (`dtype=torch.float16 if device_type ==
        "cuda" else torch.bfloat16`): the script keeps its own autocast (and GradScaler) as
        written, on each process, as under torchrun DDP; the backward goes through the
        accelerator and the Accelerator gets no mixed_precision=. A note; True if so."""
        imports = context.facts.index.imports
        for scope in scopes:
            for site in scope.calls:
                found = patterns.autocast_precision(site.node, imports)
                if found is None:
                    continue
                argument = patterns.keyword(site.node, "enabled")
                value = argument.value if argument is not None else None
                portable = (
                    value is None
                    or name_value(value) in ("True", "False")
                    or patterns.is_cuda_available_call(value, imports)
                    or context.owner_expression(scope, value) is not None
                )
                if found[0] is not None and portable:
                    continue
                why = "its dtype is chosen at run time" if found[0] is None else (
                    "whether it is on is decided where the Accelerator cannot read it")  # fmt: skip
                context.findings.append(Finding(code="MIG020", level="note", node=site.node,
                    message=(f"the autocast at line {site.node.lineno} is kept as written "
                             f"({why}): the script's own mixed precision runs on each process "
                             "(the backward goes through accelerator.backward, the Accelerator "
                             "gets no mixed_precision=)")))  # fmt: skip
                return True
        return False
