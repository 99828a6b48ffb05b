"""MIG003 model placement: `model.to(device)`, `model = model.to(device)`, `Net().to(device)`,
`model.cuda()` on a prepared model are removed; `prepare` places the model. A placement a
diagnostic that traces the model before `prepare` reads (`summary(model, (3, 224, 224))`)
stays, as in Accelerate's own examples: the diagnostic sees the model where the original had it;
so does one a copy taken before `prepare` follows (`ema = deepcopy(model)`)."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import diagnostics
from migrator.analysis.catalogue.patterns import name_of
from migrator.analysis.model.chains import chain_text
from migrator.analysis.placement.setup_uses import copies_argument
from migrator.rules.base import Rule, RuleContext
from migrator.rules.mig004_batch_placement import drop_guards_if_emptied
from migrator.rules.placement_calls import strip_placement


class ModelPlacement(Rule):
    code = "MIG003"
    name = "model-placement"
    summary = "remove .to(device)/.cuda() on models that accelerator.prepare places"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        facts = context.facts
        for scope in facts.training_scopes:
            devices = facts.device_names(scope)
            for site in scope.calls:
                if site.method not in ("to", "cuda") or context.edits.has_replacement(site.node):
                    continue
                if not self._places_prepared_model(context, site):
                    continue
                if strip_placement(site.node, devices, facts.index.imports, context.edits):
                    context.edits.clean_up(site.small)
                    drop_guards_if_emptied(context, site.statement)  # `if use_cuda:`

    def _places_prepared_model(self, context: RuleContext, site) -> bool:
        scope = site.scope
        receiver = _object_name(site.receiver)
        small = site.small
        target = _object_name(small.targets[0]) if isinstance(small, ast.Assign) else None
        if any(context.plan.reloaded_at(n, site.statement) for n in (receiver, target)):
            return False  # a model re-created after training (for inference) is not prepared
        if _moved_away(scope, receiver):
            return False  # `model.cpu()` ... `model.to(original_device)`: the move back stays
        if any(_traced_before_prepare(context, site, n) for n in (receiver, target) if n):
            return False
        if any(_copied_before_prepare(context, site, n) for n in (receiver, target) if n):
            return False
        if receiver is not None and context.prepared_role(scope, receiver) == "model":
            return True
        # `model = Net(...).to(device)`: the placement is the whole right-hand side.
        small = site.small
        if not isinstance(small, ast.Assign) or len(small.targets) != 1:
            return False
        target = _object_name(small.targets[0])
        if target is None:
            return False
        value = small.value
        while (
            isinstance(value, ast.Call)
            and value is not site.node
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("to", "cuda", "train", "eval", "half", "float")
        ):
            value = value.func.value
        if value is not site.node:
            return False
        return context.prepared_role(scope, target) == "model"


def _traced_before_prepare(context: RuleContext, site, name: str) -> bool:
    """Does a diagnostic that runs `name`'s forward (`summary(model, size)`) read it after this
    placement and before `prepare`?"""
    after = (site.node.lineno, site.node.col_offset)
    return any(
        use.kind == "arg" and diagnostics.traces_forward(use.callee)
        and (use.node.lineno, use.node.col_offset) > after
        and context.plan.before_prepare(use.statement, name)
        for use in site.scope.uses.get(name, [])
    )  # fmt: skip


def _copied_before_prepare(context: RuleContext, site, name: str) -> bool:
    """Is `name` copied (`ema = copy.deepcopy(model)`) after this placement and before
    `prepare`? Prepare places only the model: the copy (an EMA, a teacher) stays where the
    model was when copied, so the placement stays and the copy is on the device as in the
    original (h10 review: an EMA left on the CPU crashed its update on a GPU)."""
    after = (site.node.lineno, site.node.col_offset)
    return any(
        use.kind == "arg"
        and (use.callee == "copy.deepcopy" or copies_argument(context.facts.index, use))
        and (use.node.lineno, use.node.col_offset) > after
        and context.plan.before_prepare(use.statement, name)
        for use in site.scope.uses.get(name, [])
    )  # fmt: skip


def _moved_away(scope, receiver: str | None) -> bool:
    """Does `scope` move `receiver` off its device itself (`model.cpu()`, `model.to("cpu")`)?
    Then a `.to(device)` there puts it back (an export on the CPU inside `try/finally`), and
    removing it would leave the prepared model on the CPU for the rest of training."""
    if receiver is None:
        return False
    for site in scope.calls:
        if _object_name(site.receiver) != receiver:
            continue
        if site.method == "cpu":
            return True
        args = site.node.args
        if (
            site.method == "to"
            and args
            and isinstance(args[0], ast.Constant)
            and args[0].value == "cpu"
        ):
            return True
    return False


def _object_name(expr: ast.AST | None) -> str | None:
    """`model`, `self.model`, or a model held on another object (`self.cfg.model`)."""
    return name_of(expr) or chain_text(expr)
